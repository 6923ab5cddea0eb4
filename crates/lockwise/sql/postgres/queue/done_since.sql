-- How many jobs of one queue finished done in the last $2 seconds (the done_recent index).
-- $1 queue, $2 seconds
SELECT count(*) FROM {schema}.done
 WHERE queue = $1 AND state = 'done' AND finished_at > now() - make_interval(secs => $2)
