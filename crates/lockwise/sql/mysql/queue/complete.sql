-- Marks jobs done, compare-and-set on (id, attempt) and the running state, so a worker whose
-- job was rescued cannot complete it late. (id, attempt) pairs; {pairs} is one `(?,?)` per
-- job, filled in at run time.
UPDATE {jobs} SET state = 'done', finished_at = NOW(6), lease_until = NULL
 WHERE state = 'running' AND (id, attempt) IN ({pairs})
