-- One request of a session's lock calls, run in order, and the session's lease, in one
-- statement (src/backend/session/pool.rs sends it). A grant takes the advisory lock without
-- waiting; an unlock gives the lock back; a check asks whether this session holds it (a
-- renewal: the lease below is reset with it). The calls are evaluated once each, in their
-- order (a materialized CTE over a function scan).
--
-- The request's grants share one fencing token, drawn once all of them are taken: a key's
-- token is above its previous holder's, which was drawn while that holder held the key,
-- before it released it and so before this request took it. One `nextval` per request, not
-- per grant: the sequence's WAL record, and the commit's flush that comes with it every 32
-- values, are shared by every grant of the request.
--
-- $1  the calls' kinds (int2[]: 0 grant, 1 unlock, 2 check)
-- $2  the keys' class halves (int4[])
-- $3  the keys' object halves (int4[])
-- $4  whether the session keeps locks whatever these calls answer (bool)
-- $5  the lease: idle_session_timeout while the session holds a lock (text, '1234ms')
--
-- One row per call, in order: a grant's token (NULL: held elsewhere); 1 or 0 for the others.
WITH calls AS MATERIALIZED (
    SELECT c.i, c.kind,
        CASE c.kind
            WHEN 0 THEN pg_try_advisory_lock(c.class, c.half)
            WHEN 1 THEN pg_advisory_unlock(c.class, c.half)
            ELSE EXISTS (SELECT 1 FROM pg_locks l
                  WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.granted
                    AND l.mode = 'ExclusiveLock' AND l.objsubid = 2
                    AND l.classid = c.class::oid AND l.objid = c.half::oid)
        END AS yes
    FROM unnest($1::int2[], $2::int4[], $3::int4[]) WITH ORDINALITY AS c (kind, class, half, i)
), granted AS MATERIALIZED (
    -- count(*) reads every call first: the token is drawn after the last grant.
    SELECT count(*) AS n FROM calls WHERE kind = 0 AND yes
), token AS MATERIALIZED (
    SELECT CASE WHEN n > 0 THEN nextval('{schema}.fence_seq') END AS token,
           set_config('idle_session_timeout', CASE WHEN $4 OR n > 0 THEN $5 ELSE '0' END,
                      false) AS lease
      FROM granted
)
SELECT CASE WHEN calls.kind = 0 THEN CASE WHEN calls.yes THEN token.token END
            ELSE calls.yes::int::int8 END
  FROM calls CROSS JOIN token
 ORDER BY calls.i
