-- Inserts many jobs in one statement (Queue::enqueue_many), one per element of the arrays,
-- and answers one row of arrays: `ids` the id drawn for each job, in input order (drawn from
-- the identity's sequence before the insert, so they ascend in input order: the claim runs
-- equal priorities in id order); `inserted` the ids of the jobs inserted; `held_keys` and
-- `held_ids` the holders, as of this statement's snapshot, of the keys in $7. A job not
-- inserted met its key: its answer is the key's holder, or none when the holder committed
-- after this statement's snapshot (the caller looks again in a new statement). No joins: a
-- plan made for arrays of unknown length must not turn a join of two 1,000-row sets into a
-- nested loop. The rows go in key order, so that concurrent calls with the same keys wait
-- for each other's keys in the same order instead of deadlocking. The caller passes no key
-- twice in one call.
-- $1 queue, $2 payloads (text, JSON), $3 priorities, $4 delays (seconds), $5 max_attempts,
-- $6 idempotency keys (NULL for none), $7 the keys that are not NULL. $3, $4 and $5 hold one
-- element when every job shares it, and $6 none when no job has a key: unnest pads a
-- shorter array with NULLs, and the first element stands for all.
WITH input AS MATERIALIZED (
    SELECT nextval((SELECT pg_get_serial_sequence('{schema}.jobs', 'id'))) AS id, t.ord,
           t.payload, t.idempotency_key,
           COALESCE(t.priority, ($3::int2[])[1]) AS priority,
           COALESCE(t.delay, ($4::float8[])[1]) AS delay,
           COALESCE(t.max_attempts, ($5::int4[])[1]) AS max_attempts
      FROM unnest($2::text[], $3::int2[], $4::float8[], $5::int4[], $6::text[])
           WITH ORDINALITY AS t(payload, priority, delay, max_attempts, idempotency_key, ord)
),
inserted AS (
    INSERT INTO {schema}.jobs
           (id, queue, payload, priority, run_at, max_attempts, idempotency_key)
    OVERRIDING SYSTEM VALUE
    SELECT id, $1, payload::jsonb, priority, now() + make_interval(secs => delay),
           max_attempts, idempotency_key
      FROM input
     ORDER BY idempotency_key, ord
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id
),
held AS (
    SELECT e.id, e.idempotency_key FROM {schema}.jobs e
     WHERE e.queue = $1 AND e.idempotency_key = ANY($7::text[])
)
SELECT (SELECT array_agg(id ORDER BY ord) FROM input) AS ids,
       (SELECT array_agg(id) FROM inserted) AS inserted,
       (SELECT array_agg(idempotency_key ORDER BY id) FROM held) AS held_keys,
       (SELECT array_agg(id ORDER BY id) FROM held) AS held_ids
