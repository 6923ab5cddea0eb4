-- Reads one lock for `lockwise locks`, in one atomic step (nothing changes).
--
-- KEYS[1]  the lock            <prefix>:{<key>}
-- KEYS[2]  the fencing counter <prefix>:{<key>}:fence   (same hash slot as the lock)
-- KEYS[3]  the holder record   <prefix>:{<key>}:holder  (same hash slot as the lock)
-- ARGV[1]  NUMSUB, or SHARDNUMSUB on a cluster
-- ARGV[2]  the release channel <prefix>:{<key>}:released
--
-- Returns false when the lock is not held, otherwise {pttl, the counter or false, the holder
-- record or false, the number of waiters subscribed to the release channel}. The owner token
-- stays on the server: it is what lets its holder release the lock.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
return {
  redis.call('PTTL', KEYS[1]),
  redis.call('GET', KEYS[2]),
  redis.call('GET', KEYS[3]),
  redis.call('PUBSUB', ARGV[1], ARGV[2])[2],
}
