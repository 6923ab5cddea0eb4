-- Releases an idempotency key from the job that holds it if that job was enqueued at least
-- the window ago (Job::unique_for), so that the insert that follows makes a new job. The old
-- job keeps the key in released_key. ? queue, ? idempotency_key, ? window (µs)
UPDATE {jobs} SET released_key = idempotency_key, idempotency_key = NULL
 WHERE queue = ? AND idempotency_key = ?
   AND created_at <= NOW(6) - INTERVAL ? MICROSECOND
