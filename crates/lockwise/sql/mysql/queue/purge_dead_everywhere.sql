-- Deletes the dead letters of every queue in these tables that died more than ? µs ago.
DELETE FROM {jobs} WHERE state = 'dead' AND finished_at <= NOW(6) - INTERVAL ? MICROSECOND
