-- Cancels a job of any queue in the schema that has not finished: ready, scheduled or
-- running; it moves to done as 'cancelled', kept for inspection and pruned like done jobs. A
-- running job's worker finds it gone at its next heartbeat and stops the handler; its
-- completion or failure, compare-and-set on the lease, changes nothing. $1 id
WITH r AS (
    DELETE FROM {schema}.ready WHERE id = $1
    RETURNING id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key,
              NULL::text AS worker, created_at, last_error, errors
),
s AS (
    DELETE FROM {schema}.scheduled WHERE id = $1
    RETURNING id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key,
              NULL::text AS worker, created_at, last_error, errors
),
l AS (
    DELETE FROM {schema}.leases WHERE id = $1
    RETURNING id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key,
              worker, created_at, last_error, errors
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'cancelled', priority, run_at, payload, attempt, max_attempts,
       idempotency_key, worker, created_at, last_error, errors
  FROM (SELECT * FROM r UNION ALL SELECT * FROM s UNION ALL SELECT * FROM l) x
