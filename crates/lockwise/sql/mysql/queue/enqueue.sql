-- Inserts one job. A duplicate (queue, idempotency_key) fails with a unique violation (only
-- this statement is rolled back), and enqueue_existing.sql then finds the job that holds the
-- key: so the caller learns which happened. {jobs} is the validated table name.
-- ? queue, ? payload (JSON text), ? priority, ? delay (µs), ? max_attempts, ? idempotency_key
INSERT INTO {jobs} (queue, payload, priority, run_at, max_attempts, idempotency_key)
VALUES (?, ?, ?, NOW(6) + INTERVAL ? MICROSECOND, ?, ?)
