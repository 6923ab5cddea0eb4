-- Breaks a lock whoever holds it: an operator's `lockwise unlock --force`. Deletes the lock
-- and its holder record and wakes its waiters; the fencing counter stays, so the next grant's
-- token is above the broken holder's, and fenced resources refuse the broken holder's writes.
--
-- KEYS[1]  the lock            <prefix>:{<key>}
-- KEYS[2]  the fencing counter <prefix>:{<key>}:fence   (same hash slot as the lock)
-- KEYS[3]  the holder record   <prefix>:{<key>}:holder  (same hash slot as the lock)
-- ARGV[1]  PUBLISH, or SPUBLISH on a cluster
-- ARGV[2]  the release channel <prefix>:{<key>}:released
--
-- Returns false when the lock was not held, otherwise what it was, as inspect.lua reads it.
local owner = redis.call('GET', KEYS[1])
if not owner then
  return false
end
local count = 'NUMSUB'
if ARGV[1] == 'SPUBLISH' then
  count = 'SHARDNUMSUB'
end
local was = {
  redis.call('PTTL', KEYS[1]),
  redis.call('GET', KEYS[2]),
  redis.call('GET', KEYS[3]),
  redis.call('PUBSUB', count, ARGV[2])[2],
}
redis.call('DEL', KEYS[1], KEYS[3])
if was[4] > 0 then
  redis.call(ARGV[1], ARGV[2], owner)
end
return was
