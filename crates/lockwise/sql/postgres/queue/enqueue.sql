-- Inserts one job: into ready when due now, into scheduled when delayed. A key already held
-- returns its holder's id (`inserted` false), unless the job has a uniqueness window ($7) and
-- the holder took the key at least $7 seconds ago: then the new job takes the key over (the
-- old job keeps it in its own row, for inspection). No row at all when the holder committed
-- after this statement's snapshot: the caller asks again.
-- $1 queue, $2 payload, $3 priority, $4 delay (seconds), $5 max_attempts, $6 idempotency_key,
-- $7 uniqueness window (seconds) or NULL
WITH new AS (SELECT nextval('{schema}.job_id') AS id),
key AS (
    INSERT INTO {schema}.keys (queue, key, job_id)
    SELECT $1, $6, id FROM new WHERE $6 IS NOT NULL
    ON CONFLICT (queue, key) DO UPDATE SET job_id = EXCLUDED.job_id, created_at = now()
     WHERE $7::float8 IS NOT NULL AND keys.created_at <= now() - make_interval(secs => $7)
    RETURNING job_id
),
go AS MATERIALIZED (SELECT id FROM new WHERE $6 IS NULL OR EXISTS (SELECT 1 FROM key)),
due AS (
    INSERT INTO {schema}.ready (id, queue, payload, priority, max_attempts, idempotency_key)
    SELECT id, $1, $2, $3, $5, $6 FROM go WHERE $4 <= 0
),
later AS (
    INSERT INTO {schema}.scheduled (id, queue, payload, priority, run_at, max_attempts,
                                    idempotency_key)
    SELECT id, $1, $2, $3, now() + make_interval(secs => $4), $5, $6 FROM go WHERE $4 > 0
)
SELECT id, true AS inserted FROM go
UNION ALL
SELECT job_id, false FROM {schema}.keys
 WHERE queue = $1 AND key = $6 AND NOT EXISTS (SELECT 1 FROM go)
