-- Sends a cancelled job back to available now, with a fresh budget of max_attempts attempts
-- (as retry.sql does a dead one). ? id
UPDATE {jobs} SET max_attempts = attempt + max_attempts, state = 'available',
       run_at = NOW(6), finished_at = NULL, lease_until = NULL
 WHERE id = ? AND state = 'cancelled'
