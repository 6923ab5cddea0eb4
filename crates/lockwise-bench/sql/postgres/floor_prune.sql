-- The floor's retention, as a hand-written queue does it: deletes the jobs done more than $1
-- seconds ago.
DELETE FROM {schema}.floor_jobs
 WHERE state = 'done' AND finished_at < now() - make_interval(secs => $1)
