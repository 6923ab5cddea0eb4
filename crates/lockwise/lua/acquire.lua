-- Grants locks and issues their fencing tokens, each in one atomic step: one lock, or the
-- several that concurrent callers of one process asked for at once (the calls are
-- independent: each key is granted or refused on its own).
--
-- For the i-th lock (i = 1, 2, …):
-- KEYS[3i-2]  the lock            <prefix>:{<key>}
-- KEYS[3i-1]  the fencing counter <prefix>:{<key>}:fence   (same hash slot as the lock)
-- KEYS[3i]    the holder record   <prefix>:{<key>}:holder  (same hash slot as the lock)
-- ARGV[3i-2]  the owner token     32 lowercase hex characters
-- ARGV[3i-1]  the TTL             milliseconds
-- ARGV[3i]    who asks            host, pid and name, tab-separated
--
-- Returns {granted, n} per lock, flattened: {1, fence} when granted, {0, pttl} when someone
-- else holds the lock.
--
-- A grant also writes the holder record, with the lock's TTL (extend.lua renews both): the
-- fencing token, the grant's time in Unix milliseconds and who asked, tab-separated, for
-- `lockwise locks`. It is not deleted on release: a listing starts from the locks, and a
-- record whose token is not the counter's belongs to an earlier grant.
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
local now_ms = string.format('%.0f',
  tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
local answers = {}
for i = 1, #KEYS, 3 do
  local lock, fence, holder = KEYS[i], KEYS[i + 1], KEYS[i + 2]
  local at = 2 * (i - 1) / 3 + 1
  if redis.call('SET', lock, ARGV[i], 'NX', 'PX', ARGV[i + 1]) then
    local last = redis.call('GET', fence)
    local token
    answers[at] = 1
    if last and (#last > #floor or (#last == #floor and last >= floor)) then
      answers[at + 1] = redis.call('INCR', fence)
      token = string.format('%.0f', answers[at + 1])
    else
      redis.call('SET', fence, floor)
      answers[at + 1] = tonumber(floor)
      token = floor
    end
    redis.call('SET', holder, token .. '\t' .. now_ms .. '\t' .. ARGV[i + 2],
      'PX', ARGV[i + 1])
  else
    answers[at] = 0
    answers[at + 1] = redis.call('PTTL', lock)
  end
end
return answers
