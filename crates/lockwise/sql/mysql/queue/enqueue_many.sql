-- Inserts many jobs in one statement (Queue::enqueue_many): the row after VALUES is repeated,
-- comma-separated, once per job. A plain multi-row INSERT is a "simple insert": InnoDB
-- reserves its auto-increment ids at once, so they are LAST_INSERT_ID() onwards, one
-- auto_increment_increment apart, in row order. A duplicate (queue, idempotency_key) fails
-- the whole statement with a unique violation (only this statement is rolled back): the
-- caller then enqueues the jobs one at a time (enqueue.sql). {jobs} is the validated table
-- name. Per row: ? queue, ? payload (JSON text), ? priority, ? delay (µs), ? max_attempts,
-- ? idempotency_key
INSERT INTO {jobs} (queue, payload, priority, run_at, max_attempts, idempotency_key)
VALUES
(?, ?, ?, NOW(6) + INTERVAL ? MICROSECOND, ?, ?)
