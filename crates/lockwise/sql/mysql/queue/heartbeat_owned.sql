-- After heartbeat.sql: which of the jobs the worker still owns (MySQL has no RETURNING).
-- (id, attempt) pairs; {pairs} is one `(?,?)` per job, filled in at run time.
SELECT CAST(id AS SIGNED) FROM {jobs} WHERE state = 'running' AND (id, attempt) IN ({pairs})
