-- The dead letters of one queue, oldest first, in the columns of job_select.sql (read from the
-- dead table itself, not through the all_jobs view). $1 queue, $2 limit
SELECT id, queue, 'dead' AS state, priority, attempt, max_attempts, idempotency_key, payload,
       worker, last_error, errors,
       (extract(epoch FROM created_at) * 1000000)::bigint AS created_us,
       (extract(epoch FROM run_at) * 1000000)::bigint AS run_us,
       (extract(epoch FROM finished_at) * 1000000)::bigint AS finished_us,
       NULL::bigint AS lease_us
  FROM {schema}.dead
 WHERE queue = $1 ORDER BY finished_at, id LIMIT $2
