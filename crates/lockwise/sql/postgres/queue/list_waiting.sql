-- The WHERE clause after job_select.sql: one queue's jobs waiting to run, in the order they
-- will, ready ($2 true) or scheduled ($2 false). $1 queue, $2 ready, $3 limit,
-- $4 offset
 WHERE queue = $1 AND state = CASE WHEN $2 THEN 'ready' ELSE 'scheduled' END
 ORDER BY priority, run_at, id LIMIT $3 OFFSET $4
