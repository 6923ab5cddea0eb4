-- One queue's jobs waiting to run, in the order they will, ready ($2 true) or scheduled
-- ($2 false), in the columns of job.sql. $1 queue, $2 ready, $3 limit
SELECT id, queue, state, priority, attempt, max_attempts, idempotency_key, payload, worker,
       last_error, errors,
       (extract(epoch FROM created_at) * 1000000)::bigint AS created_us,
       (extract(epoch FROM run_at) * 1000000)::bigint AS run_us,
       (extract(epoch FROM finished_at) * 1000000)::bigint AS finished_us,
       (extract(epoch FROM lease_until) * 1000000)::bigint AS lease_us
  FROM (SELECT id, queue, priority, attempt, max_attempts, idempotency_key, payload,
               last_error, errors, created_at, run_at
          FROM {schema}.ready WHERE queue = $1 AND (run_at <= now()) = $2
        UNION ALL
        SELECT id, queue, priority, attempt, max_attempts, idempotency_key, payload,
               last_error, errors, created_at, run_at
          FROM {schema}.scheduled WHERE queue = $1 AND (run_at <= now()) = $2) w,
       LATERAL (SELECT CASE WHEN $2 THEN 'ready' ELSE 'scheduled' END AS state,
                       NULL::text AS worker, NULL::timestamptz AS finished_at,
                       NULL::timestamptz AS lease_until) c
 ORDER BY priority, run_at, id LIMIT $3
