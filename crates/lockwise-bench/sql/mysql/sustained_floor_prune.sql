-- The floor's retention: deletes the jobs done more than ? seconds ago. {jobs} is the
-- validated table name. ? seconds
DELETE FROM {jobs}
 WHERE state = 'done' AND finished_at < NOW(6) - INTERVAL ? SECOND
