-- Resets the lock's TTL only if the caller still owns it (compare-and-pexpire). An absent key
-- is never re-created.
--
-- KEYS[1]  the lock            <prefix>:{<key>}
-- KEYS[2]  the holder record   <prefix>:{<key>}:holder  (same hash slot; see acquire.lua)
-- ARGV[1]  the owner token
-- ARGV[2]  the new TTL         milliseconds
--
-- Returns 1 when extended, 0 when the lock is gone or owned by someone else.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
