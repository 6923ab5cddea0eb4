-- Version 15: paused queues and periodic schedules. {schema} is the quoted, validated schema
-- name.
--
-- A paused queue keeps its jobs and takes new ones, but workers claim none of it: each worker
-- reads this table once per poll interval and leaves the paused queues out of its claims.
CREATE TABLE {schema}.paused (
    queue     text        PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT now()
);

-- One row per periodic schedule: the newest period (a Unix second) a job was enqueued for, or
-- recorded as passed. A scheduler locks the row, enqueues the periods due after it and moves it
-- forward in one transaction, so each period is enqueued once whatever the number of
-- schedulers, and whatever retention later does to the jobs and their keys.
CREATE TABLE {schema}.periodic (
    name        text        PRIMARY KEY,
    queue       text        NOT NULL,
    last_period bigint,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Privileges: an application user granted what docs/cli.md lists on version 14 keeps working:
-- both tables get the grants of `ready` (as version 13 did for `workers`).
DO $grants$
DECLARE
    grant_row record;
BEGIN
    FOR grant_row IN
        SELECT a.grantee, a.privilege_type
          FROM pg_class c, aclexplode(c.relacl) a
         WHERE c.oid = '{schema}.ready'::regclass AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON {schema}.paused, {schema}.periodic TO %s',
                       grant_row.privilege_type,
                       CASE grant_row.grantee WHEN 0 THEN 'PUBLIC'
                            ELSE grant_row.grantee::regrole::text END);
    END LOOP;
END
$grants$;
