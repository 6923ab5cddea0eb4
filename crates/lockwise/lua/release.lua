-- Deletes the lock only if the caller still owns it (compare-and-delete), and wakes waiters.
--
-- KEYS[1]  the lock            <prefix>:{<key>}
-- ARGV[1]  the owner token
-- ARGV[2]  the release channel <prefix>:{<key>}:released
-- ARGV[3]  how to announce it: PUBLISH (the default), or SPUBLISH on a cluster (sharded
--          pub/sub: the channel shares the lock's hash tag, so its slot)
--
-- Returns 1 when the caller's lock was deleted, 0 when it was not the owner (nothing changed).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[3] == 'SPUBLISH' then
    redis.call('SPUBLISH', ARGV[2], ARGV[1])
  else
    redis.call('PUBLISH', ARGV[2], ARGV[1])
  end
  return 1
end
return 0
