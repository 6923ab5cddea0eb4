-- One queue's jobs in a stage that is not waiting ('running', 'done', 'dead', 'cancelled'),
-- newest first, in the columns of job.sql. $1 queue, $2 state, $3 limit
SELECT id, queue, state, priority, attempt, max_attempts, idempotency_key, payload, worker,
       last_error, errors,
       (extract(epoch FROM created_at) * 1000000)::bigint AS created_us,
       (extract(epoch FROM run_at) * 1000000)::bigint AS run_us,
       (extract(epoch FROM finished_at) * 1000000)::bigint AS finished_us,
       (extract(epoch FROM lease_until) * 1000000)::bigint AS lease_us
  FROM {schema}.all_jobs
 WHERE queue = $1 AND state = $2
 ORDER BY coalesce(finished_at, created_at) DESC, id DESC LIMIT $3
