-- Releases the reaper lock reap.sql took on this session, after an error stopped its
-- statements (a no-op when the session does not hold it).
DO RELEASE_LOCK(@lockwise_reaper_lock)
