-- Deletes locks whose caller still owns them (compare-and-delete), and wakes their waiters:
-- one lock, or the several that concurrent callers of one process gave back at once.
--
-- ARGV[1]     how to announce a release: PUBLISH (the default), or SPUBLISH on a cluster
--             (sharded pub/sub: the channel shares the lock's hash tag, so its slot)
-- For the i-th lock (i = 1, 2, …):
-- KEYS[i]     the lock            <prefix>:{<key>}
-- ARGV[2i]    the owner token
-- ARGV[2i+1]  the release channel <prefix>:{<key>}:released
--
-- A release is announced only when someone listens on its channel: waiters subscribe before
-- they try, so one that could miss the release is already counted here.
--
-- Returns, per lock, 1 when the caller's lock was deleted, 0 when it was not the owner
-- (nothing changed).
local publish, count = 'PUBLISH', 'NUMSUB'
if ARGV[1] == 'SPUBLISH' then
  publish, count = 'SPUBLISH', 'SHARDNUMSUB'
end
local answers = {}
for i = 1, #KEYS do
  local owner, channel = ARGV[2 * i], ARGV[2 * i + 1]
  if redis.call('GET', KEYS[i]) == owner then
    redis.call('DEL', KEYS[i])
    if redis.call('PUBSUB', count, channel)[2] > 0 then
      redis.call(publish, channel, owner)
    end
    answers[i] = 1
  else
    answers[i] = 0
  end
end
return answers
