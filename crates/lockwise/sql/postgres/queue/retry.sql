-- Sends a dead job back to ready now, with a fresh budget of max_attempts attempts. $1 id
WITH d AS (DELETE FROM {schema}.dead WHERE id = $1 RETURNING *)
INSERT INTO {schema}.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                            idempotency_key, created_at, last_error, errors)
SELECT id, queue, priority, now(), payload, attempt, attempt + max_attempts, idempotency_key,
       created_at, last_error, errors
  FROM d
