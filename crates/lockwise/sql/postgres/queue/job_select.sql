-- The columns of JobInfo (Queue::job, Queue::list) of every job whatever its stage (the view
-- all_jobs of v4.sql), times in µs since the Unix epoch. Completed by job.sql,
-- or list_state.sql, which add the WHERE clause (list_waiting.sql has these columns too).
-- {schema} is the quoted, validated schema name.
SELECT id, queue, state, priority, attempt, max_attempts, idempotency_key, payload, worker,
       last_error, errors,
       (extract(epoch FROM created_at) * 1000000)::bigint AS created_us,
       (extract(epoch FROM run_at) * 1000000)::bigint AS run_us,
       (extract(epoch FROM finished_at) * 1000000)::bigint AS finished_us,
       (extract(epoch FROM lease_until) * 1000000)::bigint AS lease_us
  FROM {schema}.all_jobs
