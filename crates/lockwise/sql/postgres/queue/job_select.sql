-- The columns of JobInfo (Queue::job, Queue::list), times in µs since the Unix epoch, and
-- the state as reported: available jobs are `ready` or `scheduled` by whether they are due.
-- Completed by job.sql, list_waiting.sql or list_state.sql, which add the WHERE clause.
-- {schema} is the quoted, validated schema name.
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
