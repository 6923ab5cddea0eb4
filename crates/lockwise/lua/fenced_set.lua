-- Stores a value with the fencing token that wrote it, unless a newer token already wrote.
-- A token equal to the stored one is accepted (one grant may write many times).
--
-- KEYS[1]  the fenced resource <prefix>:fenced:{<resource>}  (hash: value, token)
-- ARGV[1]  the value
-- ARGV[2]  the writer's fencing token, a decimal u64 without leading zeros
--
-- Returns {1, token} when written, {0, current} when rejected as stale (nothing changed).
-- Tokens are compared as decimal strings (length, then bytes): Lua numbers lose precision
-- above 2^53.
local current = redis.call('HGET', KEYS[1], 'token')
if current then
  local newer = #current > #ARGV[2] or (#current == #ARGV[2] and current > ARGV[2])
  if newer then
    return {0, current}
  end
end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'token', ARGV[2])
return {1, ARGV[2]}
