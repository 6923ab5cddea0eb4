-- Rescues jobs whose lease expired (their worker died, froze or lost its link). A job whose
-- start was confirmed goes back to available with the attempt counted, or dead when the
-- attempts are used up; one whose start never was (the claim's answer never reached its
-- worker) goes back with one more attempt in its budget: it did not run, and the attempt
-- number, its fencing token, still only grows. Assigned left to right like fail.sql: `started`
-- and `max_attempts` are read before they change.
--
-- The statements go in one round trip with no parameters ({lock} is the validated table name
-- plus ':reaper'), so the server takes the reaper lock, reaps and releases the lock whether
-- or not the answer reaches the reaper: a reaper whose link is cut mid-reap cannot keep the
-- others from rescuing. The lock is named after the database and the table (hashed, to stay
-- within MySQL's 64 characters; SHA2 where a FIPS server refuses MD5): the queues of two
-- databases on one server have a reaper each. It only spares reapers of one queue each
-- other's work: a row is rescued once whoever runs the UPDATE.
--
-- The reaper never waits for a worker: in a READ COMMITTED transaction (no gap locks, so no
-- claim waits for it either) it locks up to 10,000 expired leases with SKIP LOCKED, leaving
-- any that a heartbeat, an acknowledgement or a hand-back holds to that statement and to the
-- next round, then updates exactly those rows by primary key, its conditions checked again
-- (so that even a list cut short by group_concat_max_len could never name a live lease).
-- A single UPDATE over the expiry index waited for such a row (up to
-- innodb_lock_wait_timeout) and, locking in expiry order where an acknowledgement locks in id
-- order, could deadlock with it. The ids are integers the server itself produced, put into
-- the UPDATE's text (PREPARE) because a single-table UPDATE … IN (subquery) is not a
-- semi-join on MariaDB 10.11 and would scan the table; `id IN (NULL)` when there is none.
-- The last statement answers how many were rescued.
SET @lockwise_reaper_lock = CONCAT('lockwise:', LEFT(COALESCE(
    MD5(CONCAT_WS('.', DATABASE(), '{lock}')), SHA2(CONCAT_WS('.', DATABASE(), '{lock}'), 256),
    CONCAT_WS('.', DATABASE(), '{lock}')), 40));
SET @lockwise_reaper = GET_LOCK(@lockwise_reaper_lock, 0);
SET SESSION group_concat_max_len = 1048576;
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
START TRANSACTION;
SELECT GROUP_CONCAT(id) INTO @lockwise_reaped
  FROM (SELECT id FROM {jobs} FORCE INDEX (jobs_leases)
         WHERE state = 'running' AND lease_until < NOW(6) AND @lockwise_reaper = 1
         LIMIT 10000
           FOR UPDATE SKIP LOCKED) expired;
SET @lockwise_reap = CONCAT('UPDATE {jobs} SET
       errors = JSON_ARRAY_APPEND(COALESCE(errors, ''[]''), ''$'',
         JSON_OBJECT(''attempt'', attempt, ''at'', NOW(6),
                     ''error'', IF(started, ''lease expired'', ''never started''))),
       last_error = IF(started,
         CONCAT(''lease expired (worker '', COALESCE(worker, ''?''), '')''),
         CONCAT(''never started: the claim was not confirmed (worker '', COALESCE(worker, ''?''), '')'')),
       finished_at = IF(started AND attempt >= max_attempts, NOW(6), NULL),
       state = IF(started AND attempt >= max_attempts, ''dead'', ''available''),
       max_attempts = IF(started, max_attempts, max_attempts + 1),
       run_at = NOW(6), lease_until = NULL,
       started = 1
 WHERE id IN (', COALESCE(@lockwise_reaped, 'NULL'), ')
   AND state = ''running'' AND lease_until < NOW(6)');
PREPARE lockwise_reap FROM @lockwise_reap;
EXECUTE lockwise_reap;
SET @lockwise_rescued = ROW_COUNT();
DEALLOCATE PREPARE lockwise_reap;
COMMIT;
DO IF(@lockwise_reaper = 1, RELEASE_LOCK(@lockwise_reaper_lock), 0);
SELECT CAST(@lockwise_rescued AS SIGNED) AS rescued
