-- Deletes the jobs of every queue in the schema in a finished state ('done', 'dead' or
-- 'cancelled') that finished more than $2 seconds ago. $1 state, $2 age (seconds)
DELETE FROM {schema}.jobs WHERE state = $1
   AND finished_at < now() - make_interval(secs => $2)
