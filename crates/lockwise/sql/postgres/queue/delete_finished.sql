-- Deletes one queue's jobs in a finished state ('done', 'dead' or 'cancelled') that finished more than
-- $3 seconds ago. $1 queue, $2 state, $3 age (seconds)
DELETE FROM {schema}.jobs WHERE queue = $1 AND state = $2
   AND finished_at < now() - make_interval(secs => $3)
