-- For each (advisory key, session), whether that session holds that key's session-scoped
-- advisory lock exclusively: the locker's loss check, asked on a connection of its own.
-- pg_locks is read once (it takes every lock-manager partition briefly) and only the asked
-- sessions' rows are kept.
--
-- $1  the keys' class halves (int4[])
-- $2  the keys' object halves (int4[])
-- $3  the holding sessions' pg_backend_pid() (int4[])
WITH held AS MATERIALIZED (
    SELECT classid, objid, pid FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND mode = 'ExclusiveLock'
      AND pid = ANY ($3)
)
SELECT EXISTS (
    SELECT 1 FROM held h
    WHERE h.classid = k.class::oid AND h.objid = k.half::oid AND h.pid = k.pid
)
FROM unnest($1::int4[], $2::int4[], $3::int4[]) WITH ORDINALITY AS k (class, half, pid, i)
ORDER BY k.i
