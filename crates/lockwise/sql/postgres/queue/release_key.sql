-- Releases an idempotency key from the job that holds it if that job was enqueued at least
-- $3 seconds ago (Job::unique_for), so that the insert that follows makes a new job. The old
-- job keeps the key in released_key. $1 queue, $2 idempotency_key, $3 window (seconds)
UPDATE {schema}.jobs SET released_key = idempotency_key, idempotency_key = NULL
 WHERE queue = $1 AND idempotency_key = $2
   AND created_at <= now() - make_interval(secs => $3)
