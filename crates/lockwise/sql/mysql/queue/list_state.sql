-- The WHERE clause after job_select.sql: one queue's jobs in a stored state ('running',
-- 'done', 'dead', 'cancelled'), newest first. ? queue, ? state, ? limit, ? offset
 WHERE queue = ? AND state = ?
 ORDER BY COALESCE(finished_at, created_at) DESC, id DESC LIMIT ? OFFSET ?
