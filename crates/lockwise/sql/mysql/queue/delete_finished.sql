-- Deletes one queue's jobs in a finished state ('done', 'dead' or 'cancelled') that finished more than
-- the given age ago. ? queue, ? state, ? age (µs)
DELETE FROM {jobs} WHERE queue = ? AND state = ?
   AND finished_at <= NOW(6) - INTERVAL ? MICROSECOND
