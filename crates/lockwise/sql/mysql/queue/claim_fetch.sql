-- Claim, step 3 of 3: reads the claimed jobs back in claim order.
-- The ids; {ids} is one `?` per id, filled in at run time.
-- `waited_us`: from when the job became due (enqueued, or its delay or retry came) to now.
SELECT CAST(id AS SIGNED) AS id, queue, payload, attempt, max_attempts,
       CAST(GREATEST(TIMESTAMPDIFF(MICROSECOND, run_at, NOW(6)), 0) AS SIGNED) AS waited_us
  FROM {jobs}
 WHERE id IN ({ids}) ORDER BY priority, run_at, id
