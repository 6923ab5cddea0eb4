-- Inserts one job; a duplicate (queue, idempotency_key) makes LAST_INSERT_ID() the existing
-- job's id. {jobs} is the validated table name.
-- ? queue, ? payload (JSON text), ? priority, ? delay (µs), ? max_attempts, ? idempotency_key
INSERT INTO {jobs} (queue, payload, priority, run_at, max_attempts, idempotency_key)
VALUES (?, ?, ?, NOW(6) + INTERVAL ? MICROSECOND, ?, ?)
ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)
