-- Replaces a partition group's roster if its version is still the expected one.
--
-- KEYS[1]  the roster <prefix>:partition:{<group>}  (hash: version, roster)
-- ARGV[1]  the expected version, decimal (0: no roster stored yet)
-- ARGV[2]  the new roster text
--
-- Returns 1 when stored (as version ARGV[1] + 1), 0 when the version differed (nothing changed).
local version = redis.call('HGET', KEYS[1], 'version') or '0'
if version ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'version', tostring(tonumber(version) + 1), 'roster', ARGV[2])
return 1
