-- Claim, step 1 of 3 (in one READ COMMITTED transaction): locks up to n ready jobs of a queue
-- that no other claimer holds. ? queue, ? n
SELECT CAST(id AS SIGNED) FROM {jobs}
 WHERE queue = ? AND state = 'available' AND run_at <= NOW(6)
 ORDER BY priority, run_at, id LIMIT ? FOR UPDATE SKIP LOCKED
