-- Sends every dead letter of queue ? back to available now, each with a fresh budget of
-- max_attempts attempts (as retry.sql does for one). ? queue
UPDATE {jobs} SET max_attempts = attempt + max_attempts, state = 'available',
       run_at = NOW(6), finished_at = NULL
 WHERE queue = ? AND state = 'dead'
