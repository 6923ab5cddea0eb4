-- Version 13: the live workers (`lockwise queue workers`, Queue::workers). Each running
-- Worker keeps a row, refreshed every third of its lease and removed when it stops; a row
-- past expires_at is a worker that died (rows an hour past it are deleted by the next
-- refresh of any worker).
CREATE TABLE {schema}.workers (
    id          text        PRIMARY KEY,
    host        text        NOT NULL,
    pid         integer     NOT NULL,
    queues      text[]      NOT NULL,
    concurrency integer     NOT NULL,
    running     integer     NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

-- Privileges: an application user granted what docs/cli.md lists on version 12 keeps working
-- (its workers write their rows): the table gets the grants of `ready` (as version 5 did for
-- its new segments).
DO $grants$
DECLARE
    grant_row record;
BEGIN
    FOR grant_row IN
        SELECT a.grantee, a.privilege_type
          FROM pg_class c, aclexplode(c.relacl) a
         WHERE c.oid = '{schema}.ready'::regclass AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON {schema}.workers TO %s', grant_row.privilege_type,
                       CASE grant_row.grantee WHEN 0 THEN 'PUBLIC'
                            ELSE grant_row.grantee::regrole::text END);
    END LOOP;
END
$grants$;
