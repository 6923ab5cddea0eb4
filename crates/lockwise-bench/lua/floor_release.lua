-- The bench floor's release: a plain compare-and-delete, the fewest commands a safe release
-- can be (lockwise's release.lua also wakes waiters).
--
-- KEYS[1]  the lock
-- ARGV[1]  the owner token
--
-- Returns 1 when the caller's lock was deleted, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
