-- The table of who holds what, beside the objects of schema.sql and created apart from them:
-- where it is missing (a schema made by an earlier version) and the role may not create it
-- (an application user on a schema an administrator made), locks are still taken, without
-- their holders' rows. Idempotent; {schema} as in schema.sql.

-- Who holds each session-scoped lock, for `lockwise locks`: written by the holder's loss check
-- when it has seen the lock twice (locks/record.sql), so that a grant pays nothing for it. One row
-- per server session and advisory key (a session holds many locks), telling the truth only
-- while pg_locks shows that session holding that key's advisory lock; record.sql deletes the
-- rows that no longer do. Unlogged: none of it must survive a crash. (The table `holder` of
-- earlier versions, one row per session, is left to the processes that still write it.)
CREATE UNLOGGED TABLE IF NOT EXISTS {schema}.lock_holder (
    pid    int NOT NULL,
    half   int NOT NULL,
    key    text NOT NULL,
    token  bigint NOT NULL,
    since  timestamptz NOT NULL,
    lease  interval NOT NULL,
    holder text NOT NULL,
    PRIMARY KEY (pid, half)
);

-- Privileges: an application user granted what docs/cli.md lists before this table existed
-- keeps taking locks: the table gets the grants of `fence`.
DO $grants$
DECLARE
    grant_row record;
BEGIN
    FOR grant_row IN
        SELECT a.grantee, a.privilege_type
          FROM pg_class c, aclexplode(c.relacl) a
         WHERE c.oid = '{schema}.fence'::regclass AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON {schema}.lock_holder TO %s', grant_row.privilege_type,
                       CASE grant_row.grantee WHEN 0 THEN 'PUBLIC'
                            ELSE grant_row.grantee::regrole::text END);
    END LOOP;
END
$grants$;
