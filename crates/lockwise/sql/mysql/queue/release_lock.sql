-- Releases a session lock taken by migrate_lock.sql or reaper_lock.sql. ? the lock's name
SELECT RELEASE_LOCK(?)
