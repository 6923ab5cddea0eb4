-- The columns of JobInfo (Queue::job, Queue::list), times in µs since the Unix epoch, and
-- the state as reported: available jobs are `ready` or `scheduled` by whether they are due.
-- Completed by job.sql, list_waiting.sql or list_state.sql, which add the WHERE clause.
-- {jobs} is the validated table name.
SELECT CAST(id AS SIGNED) AS id, queue,
       CASE WHEN state = 'available' AND run_at > NOW(6) THEN 'scheduled'
            WHEN state = 'available' THEN 'ready'
            ELSE state END AS state,
       priority, attempt, max_attempts, COALESCE(idempotency_key, released_key) AS idempotency_key,
       payload, worker, last_error,
       COALESCE(errors, '[]') AS errors,
       CAST(UNIX_TIMESTAMP(created_at) * 1000000 AS SIGNED) AS created_us,
       CAST(UNIX_TIMESTAMP(run_at) * 1000000 AS SIGNED) AS run_us,
       CAST(UNIX_TIMESTAMP(finished_at) * 1000000 AS SIGNED) AS finished_us,
       CAST(UNIX_TIMESTAMP(lease_until) * 1000000 AS SIGNED) AS lease_us
  FROM {jobs}
