-- Sends every dead letter of queue $1 back to ready now, each with a fresh budget of
-- max_attempts attempts (as retry.sql does for one).
WITH d AS (DELETE FROM {schema}.dead WHERE queue = $1 RETURNING *)
INSERT INTO {schema}.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                            idempotency_key, created_at, last_error, errors)
SELECT id, queue, priority, now(), payload, attempt, attempt + max_attempts, idempotency_key,
       created_at, last_error, errors
  FROM d
