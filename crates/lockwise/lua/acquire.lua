-- Grants locks and issues their fencing tokens, each in one atomic step: one lock, or the
-- several that concurrent callers of one process asked for at once (the calls are
-- independent: each key is granted or refused on its own).
--
-- For the i-th lock (i = 1, 2, …):
-- KEYS[2i-1]  the lock            <prefix>:{<key>}
-- KEYS[2i]    the fencing counter <prefix>:{<key>}:fence   (same hash slot as the lock)
-- ARGV[2i-1]  the owner token     32 lowercase hex characters
-- ARGV[2i]    the TTL             milliseconds
--
-- Returns {granted, n} per lock, flattened: {1, fence} when granted, {0, pttl} when someone
-- else holds the lock.
--
-- The token is one above the last one issued for the key, and never below the server's clock
-- in Unix milliseconds × 1024. So when the counter is lost with the server's memory (a restart
-- without persistence, a failover to a replica that missed the last INCR), the next token is
-- still above every token issued before, provided the server's clock has not gone back since
-- and no key was granted more than 1024 times in one millisecond. Counters are compared as
-- decimal strings (length, then bytes): Lua numbers lose precision above 2^53.
local now = redis.call('TIME')
local floor = string.format('%.0f',
  (tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)) * 1024)
local answers = {}
for i = 1, #KEYS, 2 do
  local lock, fence = KEYS[i], KEYS[i + 1]
  if redis.call('SET', lock, ARGV[i], 'NX', 'PX', ARGV[i + 1]) then
    local last = redis.call('GET', fence)
    answers[i] = 1
    if last and (#last > #floor or (#last == #floor and last >= floor)) then
      answers[i + 1] = redis.call('INCR', fence)
    else
      redis.call('SET', fence, floor)
      answers[i + 1] = tonumber(floor)
    end
  else
    answers[i] = 0
    answers[i + 1] = redis.call('PTTL', lock)
  end
end
return answers
