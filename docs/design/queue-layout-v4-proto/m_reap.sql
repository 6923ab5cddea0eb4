PREPARE reap(int) AS -- $1 advisory class. Seq scan of the lease segments (a few hundred rows).
WITH reaper AS (SELECT pg_try_advisory_xact_lock($1, hashtext('m.reaper')) AS alone),
expired AS (
    DELETE FROM m.leases
     WHERE lease_until < now() AND (SELECT alone FROM reaper)
    RETURNING *
),
back AS (
    INSERT INTO m.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                                idempotency_key, created_at, last_error, errors)
    SELECT id, queue, priority, now(), payload, attempt,
           CASE WHEN started THEN max_attempts ELSE max_attempts + 1 END,
           idempotency_key, created_at,
           CASE WHEN started THEN 'lease expired (worker ' || coalesce(worker, '?') || ')'
                ELSE 'never started: the claim was not confirmed (worker ' || coalesce(worker, '?') || ')' END,
           errors || jsonb_build_object('attempt', attempt, 'at', now(), 'error',
                     CASE WHEN started THEN 'lease expired' ELSE 'never started' END)
      FROM expired WHERE NOT (started AND attempt >= max_attempts)
    RETURNING 1
),
died AS (
    INSERT INTO m.dead (id, queue, priority, attempt, max_attempts, idempotency_key,
                               payload, worker, last_error, errors, created_at, run_at)
    SELECT id, queue, priority, attempt, max_attempts, idempotency_key, payload, worker,
           'lease expired (worker ' || coalesce(worker, '?') || ')',
           errors || jsonb_build_object('attempt', attempt, 'at', now(), 'error', 'lease expired'),
           created_at, run_at
      FROM expired WHERE started AND attempt >= max_attempts
    RETURNING 1
)
SELECT (SELECT count(*) FROM back) + (SELECT count(*) FROM died)
;
EXECUTE reap(1);
SELECT 'ready' t, id, attempt, max_attempts, last_error FROM m.ready ORDER BY id;
