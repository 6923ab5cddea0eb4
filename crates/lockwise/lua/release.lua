-- Deletes the lock only if the caller still owns it (compare-and-delete), and wakes waiters.
--
-- KEYS[1]  the lock            <prefix>:{<key>}
-- ARGV[1]  the owner token
-- ARGV[2]  the release channel <prefix>:{<key>}:released
--
-- Returns 1 when the caller's lock was deleted, 0 when it was not the owner (nothing changed).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[1])
  return 1
end
return 0
