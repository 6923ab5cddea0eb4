-- Grants a lock and issues its fencing token in one atomic step.
--
-- KEYS[1]  the lock            <prefix>:{<key>}
-- KEYS[2]  the fencing counter <prefix>:{<key>}:fence   (same hash slot as KEYS[1])
-- ARGV[1]  the owner token     32 lowercase hex characters
-- ARGV[2]  the TTL             milliseconds
--
-- Returns {1, fence} when granted, {0, pttl} when someone else holds the lock.
--
-- The token is one above the last one issued for the key, and never below the server's clock
-- in Unix milliseconds × 1024. So when the counter is lost with the server's memory (a restart
-- without persistence, a failover to a replica that missed the last INCR), the next token is
-- still above every token issued before, provided the server's clock has not gone back since
-- and no key was granted more than 1024 times in one millisecond. Counters are compared as
-- decimal strings (length, then bytes): Lua numbers lose precision above 2^53.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local now = redis.call('TIME')
  local floor = string.format('%.0f',
    (tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)) * 1024)
  local last = redis.call('GET', KEYS[2])
  if last and (#last > #floor or (#last == #floor and last >= floor)) then
    return {1, redis.call('INCR', KEYS[2])}
  end
  redis.call('SET', KEYS[2], floor)
  return {1, tonumber(floor)}
end
return {0, redis.call('PTTL', KEYS[1])}
