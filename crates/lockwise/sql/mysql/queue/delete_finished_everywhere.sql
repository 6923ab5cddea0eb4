-- Deletes the jobs of every queue in these tables in a finished state ('done', 'dead' or
-- 'cancelled') that finished more than the given age ago. ? state, ? age (µs)
DELETE FROM {jobs} WHERE state = ? AND finished_at <= NOW(6) - INTERVAL ? MICROSECOND
