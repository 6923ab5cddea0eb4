-- The WHERE clause after job_select.sql: one queue's jobs in a stage that is not waiting
-- ('running', 'done', 'dead', 'cancelled'), newest first. $1 queue, $2 state, $3 limit, $4 offset
 WHERE queue = $1 AND state = $2
 ORDER BY coalesce(finished_at, created_at) DESC, id DESC LIMIT $3 OFFSET $4
