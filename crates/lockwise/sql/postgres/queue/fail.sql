-- Records a failed attempt: back to ready (no backoff) or scheduled (after the backoff), or
-- dead when the attempts are used up (or $5 says the failure is final). Compare-and-set on
-- (id, attempt): a worker whose job was rescued and claimed again cannot fail it late.
-- $1 id, $2 attempt, $3 error, $4 retry delay (seconds), $5 final
WITH gone AS (
    DELETE FROM {schema}.leases WHERE id = $1 AND attempt = $2 RETURNING *
),
f AS MATERIALIZED (
    SELECT g.*, ($5 OR g.attempt >= g.max_attempts) AS final,
           g.errors || jsonb_build_object('attempt', g.attempt, 'at', now(), 'error', $3)
             AS errs
      FROM gone g
),
now_ AS (
    INSERT INTO {schema}.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                                idempotency_key, created_at, last_error, errors)
    SELECT id, queue, priority, now(), payload, attempt, max_attempts, idempotency_key,
           created_at, $3, errs
      FROM f WHERE NOT final AND $4 <= 0
),
later AS (
    INSERT INTO {schema}.scheduled (id, queue, priority, run_at, payload, attempt,
                                    max_attempts, idempotency_key, created_at, last_error,
                                    errors)
    SELECT id, queue, priority, now() + make_interval(secs => $4), payload, attempt,
           max_attempts, idempotency_key, created_at, $3, errs
      FROM f WHERE NOT final AND $4 > 0
),
died AS (
    INSERT INTO {schema}.dead (id, queue, priority, run_at, payload, attempt, max_attempts,
                               idempotency_key, worker, created_at, last_error, errors)
    SELECT id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key,
           worker, created_at, $3, errs
      FROM f WHERE final
)
SELECT CASE WHEN final THEN 'dead' ELSE 'available' END AS state FROM f
