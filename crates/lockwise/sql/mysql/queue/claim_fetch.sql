-- Claim, step 3 of 3: reads the claimed jobs back in claim order.
-- The ids; {ids} is one `?` per id, filled in at run time.
SELECT CAST(id AS SIGNED) AS id, queue, payload, attempt, max_attempts FROM {jobs}
 WHERE id IN ({ids}) ORDER BY priority, run_at, id
