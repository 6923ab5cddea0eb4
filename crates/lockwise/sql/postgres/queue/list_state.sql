-- One queue's jobs in a stored state ('running', 'done', 'dead', 'cancelled'), newest
-- first. $1 queue, $2 state, $3 limit
SELECT id, queue,
       CASE WHEN state = 'available' AND run_at > now() THEN 'scheduled'
            WHEN state = 'available' THEN 'ready'
            ELSE state END AS state,
       priority, attempt, max_attempts, COALESCE(idempotency_key, released_key) AS idempotency_key,
       payload, worker, last_error, errors,
       (extract(epoch FROM created_at) * 1000000)::bigint AS created_us,
       (extract(epoch FROM run_at) * 1000000)::bigint AS run_us,
       (extract(epoch FROM finished_at) * 1000000)::bigint AS finished_us,
       (extract(epoch FROM lease_until) * 1000000)::bigint AS lease_us
  FROM {schema}.jobs
 WHERE queue = $1 AND state = $2
 ORDER BY coalesce(finished_at, created_at) DESC, id DESC LIMIT $3
