-- The session-scoped and transaction-scoped advisory locks of lockwise's class held now in
-- this database (`lockwise locks`), with what `holder` says of them, the holding session, and
-- the sessions waiting in line; with $3, their holders' sessions are also terminated (`lockwise
-- unlock --force`), each within 5 s.
--
-- $1  lockwise's advisory class (int4)
-- $2  one lock's object half (int4), or NULL for all
-- $3  whether to terminate the holders' sessions (bool)
--
-- A row of `lock_holder` describes the lock only when its key hashes to the lock's object half:
-- the caller checks. The lease left counts from the moment the session went idle, as
-- idle_session_timeout does.
SELECT l.pid,
       l.objid::int8 AS objid,
       h.key,
       h.token,
       EXTRACT(EPOCH FROM clock_timestamp() - h.since)::float8 AS held_secs,
       EXTRACT(EPOCH FROM h.lease - CASE WHEN a.state = 'idle'
                                         THEN clock_timestamp() - a.state_change
                                         ELSE interval '0' END)::float8 AS ttl_secs,
       h.holder,
       host(a.client_addr) AS client,
       a.application_name,
       (SELECT count(*) FROM pg_locks w
         WHERE w.locktype = 'advisory' AND NOT w.granted AND w.database = l.database
           AND w.classid = l.classid AND w.objid = l.objid AND w.objsubid = 2) AS waiters,
       CASE WHEN $3 THEN pg_terminate_backend(l.pid, 5000) END AS terminated
  FROM pg_locks l
  LEFT JOIN {schema}.lock_holder h ON h.pid = l.pid AND h.half::oid = l.objid
  LEFT JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.mode = 'ExclusiveLock'
   AND l.classid = $1::int4::oid
   AND ($2::int4 IS NULL OR l.objid = $2::int4::oid)
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
 ORDER BY h.key, l.pid
