-- Raises a lock's fencing counter to at least ARGV[1], e.g. after a Redis restart without
-- persistence reset it below tokens a fenced resource has already accepted. Never lowers it.
--
-- KEYS[1]  the fencing counter <prefix>:{<key>}:fence
-- ARGV[1]  the minimum value, a decimal u64 without leading zeros
--
-- Returns the counter's value afterwards.
local current = redis.call('GET', KEYS[1])
if (not current) or #current < #ARGV[1] or (#current == #ARGV[1] and current < ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return current
