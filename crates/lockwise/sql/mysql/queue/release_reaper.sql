-- Ends what reap.sql left after an error stopped its statements: its transaction, rolled back,
-- and the reaper lock it took on this session (a no-op when the session does not hold it).
ROLLBACK;
DO RELEASE_LOCK(@lockwise_reaper_lock)
