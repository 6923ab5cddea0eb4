-- The job that holds an idempotency key, after enqueue.sql found it taken: a locking read,
-- so it sees the newest committed row even inside an older snapshot. {jobs} is the
-- validated table name.
-- ? queue, ? idempotency_key
SELECT CAST(id AS SIGNED) FROM {jobs}
 WHERE queue = ? AND idempotency_key = ?
 LOCK IN SHARE MODE
