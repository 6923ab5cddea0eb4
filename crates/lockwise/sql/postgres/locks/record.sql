-- Writes who holds each session-scoped lock (`lockwise locks`), one row per holding session
-- and key, for the locks a locker's loss check saw for the second time: the grant itself
-- writes nothing. A row tells the truth only while pg_locks shows its session holding the
-- advisory lock its key hashes to (held.sql checks); the rows that no longer do are deleted
-- first, pg_locks read once.
--
-- $1  the sessions (int4[])
-- $2  the keys, with their namespace (text[])
-- $3  the fencing tokens (int8[])
-- $4  when they were granted, Unix seconds (float8[])
-- $5  the TTLs, seconds (float8[])
-- $6  who holds them: host, pid and name, tab-separated (text)
-- $7  the keys' advisory object halves (int4[])
WITH stale AS (
    DELETE FROM {schema}.lock_holder h
     WHERE NOT EXISTS (
        SELECT 1 FROM pg_locks l
         WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
           AND l.pid = h.pid AND l.objid = h.half::oid)
)
INSERT INTO {schema}.lock_holder AS h (pid, half, key, token, since, lease, holder)
SELECT pid, half, key, token, to_timestamp(since), make_interval(secs => ttl), $6
  FROM unnest($1::int4[], $7::int4[], $2::text[], $3::int8[], $4::float8[], $5::float8[])
       AS r (pid, half, key, token, since, ttl)
ON CONFLICT (pid, half) DO UPDATE
    SET key = EXCLUDED.key, token = EXCLUDED.token, since = EXCLUDED.since,
        lease = EXCLUDED.lease, holder = EXCLUDED.holder
