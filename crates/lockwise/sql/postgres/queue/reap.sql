-- Rescues jobs whose lease expired (their worker died, froze or lost its link). A job whose
-- start was confirmed goes back to ready with the attempt counted, or dead when the attempts
-- are used up. A job whose start never was (the claim's answer never reached its worker)
-- goes back with one more attempt in its budget: it did not run, and the attempt number, its
-- fencing token, still only grows. The expired leases are locked first with SKIP LOCKED: a
-- lease that a worker's statement holds (a heartbeat renewing it, an acknowledgement or a
-- hand-back ending it) is left to that statement, and to the next round if it still expires.
-- So the reaper never waits for a worker, and never deadlocks with one (its locks came in plan
-- order, a heartbeat's in (segment, id) order).
-- One statement, so the reaper lock (a transaction lock) is released by the server when the
-- statement ends, whether or not its answer reaches the reaper: a reaper whose link is cut
-- mid-reap cannot keep the others from rescuing. One row, the count, and not the rescued rows,
-- for the same reason (rows nobody reads could fill the socket and hold the statement open).
-- $1 the lockwise advisory class. The lock's key string is fixed: other versions agree on it.
WITH reaper AS (SELECT pg_try_advisory_xact_lock($1, hashtext('{schema}.reaper')) AS alone),
locked AS MATERIALIZED (
    SELECT l.seg, l.id
      FROM {schema}.leases l
     WHERE l.lease_until < now() AND (SELECT alone FROM reaper)
       FOR UPDATE OF l SKIP LOCKED
),
expired AS (
    DELETE FROM {schema}.leases l
     USING locked k
     WHERE l.seg = k.seg AND l.id = k.id AND l.lease_until < now()
    RETURNING l.*
),
back AS (
    INSERT INTO {schema}.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                                idempotency_key, created_at, last_error, errors)
    SELECT id, queue, priority, now(), payload, attempt,
           CASE WHEN started THEN max_attempts ELSE max_attempts + 1 END,
           idempotency_key, created_at,
           CASE WHEN started THEN 'lease expired (worker ' || coalesce(worker, '?') || ')'
                ELSE 'never started: the claim was not confirmed (worker '
                     || coalesce(worker, '?') || ')' END,
           errors || jsonb_build_object('attempt', attempt, 'at', now(), 'error',
                     CASE WHEN started THEN 'lease expired' ELSE 'never started' END)
      FROM expired WHERE NOT (started AND attempt >= max_attempts)
    RETURNING 1
),
died AS (
    INSERT INTO {schema}.dead (id, queue, priority, run_at, payload, attempt, max_attempts,
                               idempotency_key, worker, created_at, last_error, errors)
    SELECT id, queue, priority, now(), payload, attempt, max_attempts, idempotency_key,
           worker, created_at, 'lease expired (worker ' || coalesce(worker, '?') || ')',
           errors || jsonb_build_object('attempt', attempt, 'at', now(), 'error',
                                        'lease expired')
      FROM expired WHERE started AND attempt >= max_attempts
    RETURNING 1
)
SELECT (SELECT count(*) FROM back) + (SELECT count(*) FROM died) AS rescued
