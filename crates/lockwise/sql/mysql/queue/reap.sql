-- Rescues jobs whose lease expired (their worker died, froze or lost its link). A job whose
-- start was confirmed goes back to available with the attempt counted, or dead when the
-- attempts are used up; one whose start never was (the claim's answer never reached its
-- worker) goes back with one more attempt in its budget: it did not run, and the attempt
-- number, its fencing token, still only grows. Assigned left to right like fail.sql: `started`
-- and `max_attempts` are read before they change.
-- Four statements sent in one round trip (no parameters: {lock} is the validated table name
-- plus ':reaper'), so the server takes the reaper lock, reaps and releases the lock whether
-- or not the answer reaches the reaper: a reaper whose link is cut mid-reap cannot keep the
-- others from rescuing. The lock is named after the database and the table (hashed, to stay
-- within MySQL's 64 characters; SHA2 where a FIPS server refuses MD5): the queues of two
-- databases on one server have a reaper each. It used to be the table's name alone, which
-- every database's queue shared, so one database's reaper made another's skip its round.
-- The lock only spares reapers of one queue each other's row-lock waits: a row is rescued
-- once whoever runs the UPDATE.
SET @lockwise_reaper_lock = CONCAT('lockwise:', LEFT(COALESCE(
    MD5(CONCAT_WS('.', DATABASE(), '{lock}')), SHA2(CONCAT_WS('.', DATABASE(), '{lock}'), 256),
    CONCAT_WS('.', DATABASE(), '{lock}')), 40));
SET @lockwise_reaper = GET_LOCK(@lockwise_reaper_lock, 0);
UPDATE {jobs} SET
       errors = JSON_ARRAY_APPEND(COALESCE(errors, '[]'), '$',
         JSON_OBJECT('attempt', attempt, 'at', NOW(6),
                     'error', IF(started, 'lease expired', 'never started'))),
       last_error = IF(started,
         CONCAT('lease expired (worker ', COALESCE(worker, '?'), ')'),
         CONCAT('never started: the claim was not confirmed (worker ', COALESCE(worker, '?'), ')')),
       finished_at = IF(started AND attempt >= max_attempts, NOW(6), NULL),
       state = IF(started AND attempt >= max_attempts, 'dead', 'available'),
       max_attempts = IF(started, max_attempts, max_attempts + 1),
       run_at = NOW(6), lease_until = NULL,
       started = 1
 WHERE state = 'running' AND lease_until < NOW(6) AND @lockwise_reaper = 1;
DO IF(@lockwise_reaper = 1, RELEASE_LOCK(@lockwise_reaper_lock), 0)
