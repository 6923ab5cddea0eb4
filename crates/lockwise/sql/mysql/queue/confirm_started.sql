-- Confirms that a worker received its claim and starts these jobs (compare-and-set on id and
-- attempt, so a confirmation that arrives after a rescue confirms nothing). The connection
-- reports matched rows (CLIENT_FOUND_ROWS): when they are all the jobs, all are confirmed.
-- (id, attempt) pairs; {pairs} is one `(?,?)` per job, filled in at run time.
-- FORCE INDEX (PRIMARY): locked by id, in id order (see complete.sql).
UPDATE {jobs} FORCE INDEX (PRIMARY) SET started = 1 WHERE state = 'running' AND (id, attempt) IN ({pairs})
