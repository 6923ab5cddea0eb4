-- The live workers, longest running first; times in microseconds since the epoch.
SELECT id, host, pid, queues, concurrency, running,
       (extract(epoch FROM started_at) * 1000000)::int8 AS started_us,
       (extract(epoch FROM seen_at) * 1000000)::int8 AS seen_us
  FROM {schema}.workers WHERE expires_at > now()
 ORDER BY started_at, id
