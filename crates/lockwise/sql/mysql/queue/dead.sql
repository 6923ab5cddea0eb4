-- The WHERE clause after job_select.sql: the dead letters of one queue, oldest first.
-- ? queue, ? limit
 WHERE queue = ? AND state = 'dead' ORDER BY finished_at, id LIMIT ?
