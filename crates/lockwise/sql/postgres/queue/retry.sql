-- Sends a dead job back to available now, with a fresh budget of max_attempts attempts.
-- $1 id
UPDATE {schema}.jobs SET state = 'available', run_at = now(), finished_at = NULL,
       max_attempts = attempt + max_attempts
 WHERE id = $1 AND state = 'dead'
