-- How many jobs of one queue finished done in the last ? microseconds (jobs_finished).
-- ? queue, ? microseconds
SELECT COUNT(*) FROM {jobs}
 WHERE queue = ? AND state = 'done' AND finished_at > NOW(6) - INTERVAL ? MICROSECOND
