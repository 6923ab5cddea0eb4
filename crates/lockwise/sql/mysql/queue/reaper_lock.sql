-- 1 when this session is the only reaper of these tables (a session lock, released by
-- release_lock.sql; never waits). ? the lock's name
SELECT CAST(GET_LOCK(?, 0) AS SIGNED)
