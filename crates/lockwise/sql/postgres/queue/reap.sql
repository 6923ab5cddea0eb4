-- Rescues jobs whose lease expired (their worker died, froze or lost its link). A job whose
-- start was confirmed goes back to available with the attempt counted, or dead when the
-- attempts are used up. A job whose start never was (the claim's answer never reached its
-- worker) goes back with one more attempt in its budget: it did not run, and the attempt
-- number, its fencing token, still only grows. The WHERE is re-checked on each locked row,
-- so a job that finished meanwhile is never overwritten.
-- One statement, so the reaper lock (a transaction lock) is released by the server when the
-- statement ends, whether or not its answer reaches the reaper: a reaper whose link is cut
-- mid-reap cannot keep the others from rescuing. No RETURNING, for the same reason (rows
-- nobody reads could fill the socket and hold the statement open).
-- $1 the lockwise advisory class. The lock's key string is fixed: other versions agree on it.
WITH reaper AS (SELECT pg_try_advisory_xact_lock($1, hashtext('{schema}.reaper')) AS alone)
UPDATE {schema}.jobs
   SET state = CASE WHEN started AND attempt >= max_attempts THEN 'dead' ELSE 'available' END,
       finished_at = CASE WHEN started AND attempt >= max_attempts THEN now() END,
       max_attempts = CASE WHEN started THEN max_attempts ELSE max_attempts + 1 END,
       started = true,
       run_at = now(),
       lease_until = NULL,
       last_error = CASE WHEN started
                         THEN 'lease expired (worker ' || coalesce(worker, '?') || ')'
                         ELSE 'never started: the claim was not confirmed (worker '
                              || coalesce(worker, '?') || ')' END,
       errors = errors || jsonb_build_object('attempt', attempt, 'at', now(), 'error',
                          CASE WHEN started THEN 'lease expired' ELSE 'never started' END)
 WHERE state = 'running' AND lease_until < now() AND (SELECT alone FROM reaper)
