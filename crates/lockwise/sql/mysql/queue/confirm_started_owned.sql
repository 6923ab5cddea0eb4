-- After confirm_started.sql matched fewer rows than jobs: which ones it confirmed.
-- (id, attempt) pairs; {pairs} is one `(?,?)` per job, filled in at run time.
SELECT CAST(id AS SIGNED) FROM {jobs}
 WHERE state = 'running' AND started = 1 AND (id, attempt) IN ({pairs})
