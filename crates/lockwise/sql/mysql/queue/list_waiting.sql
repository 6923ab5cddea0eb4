-- The WHERE clause after job_select.sql: one queue's jobs waiting to run, in the order they
-- will, ready (? true) or scheduled (? false). ? queue, ? ready, ? limit, ? offset
 WHERE queue = ? AND state = 'available' AND (run_at <= NOW(6)) = ?
 ORDER BY priority, run_at, id LIMIT ? OFFSET ?
