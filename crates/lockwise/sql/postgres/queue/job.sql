-- One job of any queue in the schema, whatever its stage, in the columns of JobInfo: times
-- in µs since the Unix epoch. $1 id
SELECT id, queue, state, priority, attempt, max_attempts, idempotency_key, payload, worker,
       last_error, errors,
       (extract(epoch FROM created_at) * 1000000)::bigint AS created_us,
       (extract(epoch FROM run_at) * 1000000)::bigint AS run_us,
       (extract(epoch FROM finished_at) * 1000000)::bigint AS finished_us,
       (extract(epoch FROM lease_until) * 1000000)::bigint AS lease_us
  FROM {schema}.all_jobs
 WHERE id = $1
 LIMIT 1
