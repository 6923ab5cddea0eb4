-- Sends a dead job back to available now, with a fresh budget of max_attempts attempts
-- (max_attempts is assigned first, while attempt is unchanged). ? id
UPDATE {jobs} SET max_attempts = attempt + max_attempts, state = 'available',
       run_at = NOW(6), finished_at = NULL
 WHERE id = ? AND state = 'dead'
