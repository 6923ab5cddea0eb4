-- Writes who holds a lock (`lockwise locks`), if the caller still holds it: the holder's
-- loss check does, when it first sees the lock, so that a grant pays nothing for it. The
-- record expires with the lock (extend.lua renews both).
--
-- KEYS[1]  the lock            <prefix>:{<key>}
-- KEYS[2]  the holder record   <prefix>:{<key>}:holder  (same hash slot as the lock)
-- ARGV[1]  the owner token
-- ARGV[2]  the record: fencing token, grant time (Unix ms) and holder (host, pid, name),
--          tab-separated
--
-- Returns 1 when written, 0 when the lock is gone or someone else's.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl > 0 then
    redis.call('SET', KEYS[2], ARGV[2], 'PX', pttl)
    return 1
  end
end
return 0
