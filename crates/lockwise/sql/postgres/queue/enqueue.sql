-- Inserts one job; a duplicate (queue, idempotency_key) returns the existing job's id.
-- `inserted` tells which happened.
-- $1 queue, $2 payload, $3 priority, $4 delay (seconds), $5 max_attempts, $6 idempotency_key
WITH inserted AS (
    INSERT INTO {schema}.jobs (queue, payload, priority, run_at, max_attempts, idempotency_key)
    VALUES ($1, $2, $3, now() + make_interval(secs => $4), $5, $6)
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id
)
SELECT id, true AS inserted FROM inserted
UNION ALL
SELECT id, false AS inserted FROM {schema}.jobs
 WHERE queue = $1 AND idempotency_key = $6 AND NOT EXISTS (SELECT 1 FROM inserted)
