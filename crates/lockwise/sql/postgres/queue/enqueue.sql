-- Inserts one job: into ready when due now, into scheduled when delayed. A key already held
-- returns its holder's id (`inserted` false), unless the job has a uniqueness window ($7) and
-- the holder took the key at least $7 seconds ago: then the new job takes the key over (the
-- old job keeps it in its own row, for inspection). No row at all when the holder committed
-- after this statement's snapshot: the caller asks again.
-- $1 queue, $2 payload, $3 priority, $4 delay (seconds), $5 max_attempts, $6 idempotency_key,
-- $7 uniqueness window (seconds) or NULL
WITH new AS (SELECT nextval('{schema}.job_id') AS id),
key AS (
    -- With a window, a held key's row is always updated (to itself unless the window has
    -- passed), so that RETURNING names its holder as of now, even one that took it over
    -- after this statement's snapshot; without one, a held key returns nothing here.
    INSERT INTO {schema}.keys (queue, key, job_id)
    SELECT $1, $6, id FROM new WHERE $6 IS NOT NULL
    ON CONFLICT (queue, key) DO UPDATE
       SET job_id = CASE WHEN keys.created_at <= now() - make_interval(secs => $7)
                         THEN EXCLUDED.job_id ELSE keys.job_id END,
           created_at = CASE WHEN keys.created_at <= now() - make_interval(secs => $7)
                             THEN now() ELSE keys.created_at END
     WHERE $7::float8 IS NOT NULL
    RETURNING job_id
),
go AS MATERIALIZED (
    SELECT id FROM new WHERE $6 IS NULL OR id IN (SELECT job_id FROM key)
),
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
SELECT job_id, false FROM key WHERE job_id <> (SELECT id FROM new)
UNION ALL
SELECT job_id, false FROM {schema}.keys
 WHERE queue = $1 AND key = $6 AND NOT EXISTS (SELECT 1 FROM go)
   AND NOT EXISTS (SELECT 1 FROM key)
