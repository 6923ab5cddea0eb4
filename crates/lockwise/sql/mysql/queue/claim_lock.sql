-- Claim, step 1 of 3 (in one READ COMMITTED transaction): locks up to n ready jobs of the
-- queues that no other claimer holds. The queues ({queues} is one `?` per queue, filled in at
-- run time), then ? n
SELECT CAST(id AS SIGNED) FROM {jobs}
 WHERE queue IN ({queues}) AND state = 'available' AND run_at <= NOW(6)
 ORDER BY priority, run_at, id LIMIT ? FOR UPDATE SKIP LOCKED
