-- Inserts many jobs in one statement (Queue::enqueue_many), one row per element of the
-- arrays, and answers one row per element in their order: `id` the new job's, or for a
-- duplicate (queue, idempotency_key) the existing job's, `inserted` which happened. The ids
-- are drawn from the identity's sequence before the insert, element by element, so each
-- answer row is joined to its input by id and not by the order of RETURNING, and the ids of
-- one call ascend in input order (the claim runs equal priorities in id order). The rows go
-- in key order, so that concurrent calls with the same keys wait for each other's keys in
-- the same order instead of deadlocking. The caller passes no key twice in one call. `id` is NULL when the key's holder committed after this
-- statement's snapshot: the caller looks again in a new statement.
-- $1 queue, $2 payloads (text, JSON), $3 priorities, $4 delays (seconds), $5 max_attempts,
-- $6 idempotency keys (NULL for none)
WITH input AS MATERIALIZED (
    SELECT nextval((SELECT pg_get_serial_sequence('{schema}.jobs', 'id'))) AS id, t.*
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
)
SELECT COALESCE(n.id, e.id) AS id, n.id IS NOT NULL AS inserted
  FROM input i
  LEFT JOIN inserted n ON n.id = i.id
  LEFT JOIN {schema}.jobs e
         ON n.id IS NULL AND e.queue = $1 AND e.idempotency_key = i.idempotency_key
 ORDER BY i.ord
