-- Graceful shutdown: gives unfinished jobs back to available at once. The attempt stays
-- counted (it is the job's fencing token) and the budget grows by one.
-- (id, attempt) pairs; {pairs} is one `(?,?)` per job, filled in at run time.
-- FORCE INDEX (PRIMARY): locked by id, in id order (see complete.sql).
UPDATE {jobs} FORCE INDEX (PRIMARY) SET state = 'available', run_at = NOW(6), lease_until = NULL,
       max_attempts = max_attempts + 1
 WHERE state = 'running' AND (id, attempt) IN ({pairs})
