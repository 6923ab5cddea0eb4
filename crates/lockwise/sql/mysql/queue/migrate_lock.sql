-- Waits up to 30 s to be the only process migrating these tables (a session lock, released
-- by release_lock.sql). ? the lock's name
SELECT GET_LOCK(?, 30)
