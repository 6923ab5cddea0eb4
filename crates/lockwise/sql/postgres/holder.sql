-- The table of who holds what, beside the objects of schema.sql and created apart from them:
-- where it is missing (a schema made by an earlier version) and the role may not create it
-- (an application user on a schema an administrator made), locks are still taken, without
-- their holders' rows. Idempotent; {schema} as in schema.sql.

-- Who holds each session-scoped lock, for `lockwise locks`: written by the holder's loss check
-- when it has seen the lock twice (locks/record.sql), so that a grant pays nothing for it. One row
-- per server session (a session holds one lock at a time), telling the truth only while
-- pg_locks shows that session holding that key's advisory lock; a later lock of the session
-- overwrites it. Unlogged: none of it must survive a crash.
CREATE UNLOGGED TABLE IF NOT EXISTS {schema}.holder (
    pid    int PRIMARY KEY,
    key    text NOT NULL,
    token  bigint NOT NULL,
    since  timestamptz NOT NULL,
    lease  interval NOT NULL,
    holder text NOT NULL
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
        EXECUTE format('GRANT %s ON {schema}.holder TO %s', grant_row.privilege_type,
                       CASE grant_row.grantee WHEN 0 THEN 'PUBLIC'
                            ELSE grant_row.grantee::regrole::text END);
    END LOOP;
END
$grants$;
