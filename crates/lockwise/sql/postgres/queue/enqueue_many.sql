-- Inserts many jobs in one statement (Queue::enqueue_many), one per element of the arrays,
-- and answers one row of arrays: `ids` the id drawn for each job, in input order (drawn
-- before the insert, so they ascend in input order: the claim runs equal priorities in id
-- order); `inserted` the ids of the jobs inserted; `held_keys` and `held_ids` the holders,
-- as of this statement's snapshot, of the keys in $7. A job not inserted met its key: its
-- answer is the key's holder, or none when the holder committed after this statement's
-- snapshot (the caller looks again in a new statement). The keys go in key order, so that
-- concurrent calls with the same keys wait for each other's keys in the same order instead
-- of deadlocking. The caller passes no key twice in one call, and no uniqueness window.
-- $1 queue, $2 payloads (text, JSON), $3 priorities, $4 delays (seconds), $5 max_attempts,
-- $6 idempotency keys (NULL for none), $7 the keys that are not NULL. $3, $4 and $5 hold one
-- element when every job shares it, and $6 none when no job has a key: unnest pads a
-- shorter array with NULLs, and the first element stands for all.
WITH input AS MATERIALIZED (
    SELECT nextval('{schema}.job_id') AS id, t.ord, t.payload, t.idempotency_key,
           COALESCE(t.priority, ($3::int2[])[1]) AS priority,
           COALESCE(t.delay, ($4::float8[])[1]) AS delay,
           COALESCE(t.max_attempts, ($5::int4[])[1]) AS max_attempts
      FROM unnest($2::text[], $3::int2[], $4::float8[], $5::int4[], $6::text[])
           WITH ORDINALITY AS t(payload, priority, delay, max_attempts, idempotency_key, ord)
),
keyed AS (
    INSERT INTO {schema}.keys (queue, key, job_id)
    SELECT $1, idempotency_key, id FROM input WHERE idempotency_key IS NOT NULL
     ORDER BY idempotency_key
    ON CONFLICT (queue, key) DO NOTHING
    RETURNING job_id
),
go AS MATERIALIZED (
    SELECT * FROM input
     WHERE idempotency_key IS NULL OR id IN (SELECT job_id FROM keyed)
),
due AS (
    INSERT INTO {schema}.ready (id, queue, payload, priority, max_attempts, idempotency_key)
    SELECT id, $1, payload::jsonb, priority, max_attempts, idempotency_key
      FROM go WHERE delay <= 0 ORDER BY ord
),
later AS (
    INSERT INTO {schema}.scheduled (id, queue, payload, priority, run_at, max_attempts,
                                    idempotency_key)
    SELECT id, $1, payload::jsonb, priority, now() + make_interval(secs => delay),
           max_attempts, idempotency_key
      FROM go WHERE delay > 0
),
held AS (
    SELECT k.job_id AS id, k.key FROM {schema}.keys k
     WHERE k.queue = $1 AND k.key = ANY($7::text[])
)
SELECT (SELECT array_agg(id ORDER BY ord) FROM input) AS ids,
       (SELECT array_agg(id) FROM go) AS inserted,
       (SELECT array_agg(key ORDER BY id) FROM held) AS held_keys,
       (SELECT array_agg(id ORDER BY id) FROM held) AS held_ids
