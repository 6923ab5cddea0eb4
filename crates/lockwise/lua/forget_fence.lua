-- Deletes a lock's fencing counter unless someone other than the caller holds the lock: for
-- locks whose tokens fence nothing once their user is gone (a partition member that left its
-- group). A counter deleted this way restarts at the server's clock in ms × 1024 (acquire.lua),
-- still above every token it issued, as long as the server's clock has not gone back.
--
-- KEYS[1]  the lock            <prefix>:{<key>}
-- KEYS[2]  the fencing counter <prefix>:{<key>}:fence   (same hash slot as KEYS[1])
-- ARGV[1]  the caller's owner token, or '' when the caller holds nothing
--
-- Returns 1 when the counter was deleted (or absent), 0 when someone else holds the lock.
local owner = redis.call('GET', KEYS[1])
if owner and owner ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[2])
return 1
