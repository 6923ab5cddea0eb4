-- Cancels the unfinished jobs of queue $1 in the states asked, as cancel.sql does one job:
-- $2 ready (due now), $3 scheduled (due later), $4 running. `cancelled` is how many.
WITH r AS (
    DELETE FROM {schema}.ready
     WHERE queue = $1 AND (($2 AND run_at <= now()) OR ($3 AND run_at > now()))
    RETURNING id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key,
              NULL::text AS worker, created_at, last_error, errors
),
s AS (
    DELETE FROM {schema}.scheduled
     WHERE queue = $1 AND (($2 AND run_at <= now()) OR ($3 AND run_at > now()))
    RETURNING id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key,
              NULL::text AS worker, created_at, last_error, errors
),
l AS (
    DELETE FROM {schema}.leases WHERE queue = $1 AND $4
    RETURNING id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key,
              worker, created_at, last_error, errors
),
moved AS (
    INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt,
                               max_attempts, idempotency_key, worker, created_at, last_error,
                               errors)
    SELECT id, queue, 'cancelled', priority, run_at, payload, attempt, max_attempts,
           idempotency_key, worker, created_at, last_error, errors
      FROM (SELECT * FROM r UNION ALL SELECT * FROM s UNION ALL SELECT * FROM l) x
    RETURNING 1
)
SELECT count(*) AS cancelled FROM moved
