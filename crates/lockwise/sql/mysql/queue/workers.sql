-- The live workers, longest running first; times in microseconds since the epoch.
SELECT id, host, pid, queues, concurrency, running,
       CAST(UNIX_TIMESTAMP(started_at) * 1000000 AS SIGNED) AS started_us,
       CAST(UNIX_TIMESTAMP(seen_at) * 1000000 AS SIGNED) AS seen_us
  FROM {workers} WHERE expires_at > NOW(6)
 ORDER BY started_at, id
