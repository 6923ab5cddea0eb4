-- Grants a session-scoped lock in one statement: the session's server-side lease
-- (idle_session_timeout) first, so that a holder frozen right after the grant still loses it;
-- pg_try_advisory_lock; and only if granted, the next fencing token and the session's row of
-- `holder` (who holds what, for `lockwise locks`).
--
-- $1, $2  the advisory key (int4, int4)
-- $3      the lease, as idle_session_timeout takes it ('30000ms')
-- $4      the lock's key (with its namespace)
-- $5      who asks: host, pid and name, tab-separated
--
-- Returns the lease set, the session's pid, and the token (NULL when refused).
WITH attempt AS MATERIALIZED (
    SELECT set_config('idle_session_timeout', $3, false) AS lease, pg_backend_pid() AS pid,
           CASE WHEN pg_try_advisory_lock($1, $2) THEN nextval('{schema}.fence_seq') END AS token
), holder AS (
    INSERT INTO {schema}.holder AS h (pid, key, token, since, lease, holder)
    SELECT pid, $4, token, now(), $3::interval, $5 FROM attempt WHERE token IS NOT NULL
    ON CONFLICT (pid) DO UPDATE
        SET key = EXCLUDED.key, token = EXCLUDED.token, since = EXCLUDED.since,
            lease = EXCLUDED.lease, holder = EXCLUDED.holder
)
SELECT lease, pid, token FROM attempt
