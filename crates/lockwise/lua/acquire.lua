-- Grants a lock and issues its fencing token in one atomic step.
--
-- KEYS[1]  the lock            <prefix>:{<key>}
-- KEYS[2]  the fencing counter <prefix>:{<key>}:fence   (same hash slot as KEYS[1])
-- ARGV[1]  the owner token     32 lowercase hex characters
-- ARGV[2]  the TTL             milliseconds
--
-- Returns {1, fence} when granted, {0, pttl} when someone else holds the lock.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
return {0, redis.call('PTTL', KEYS[1])}
