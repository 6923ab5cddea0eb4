-- The tables lockwise keeps in PostgreSQL, in one schema (default "lockwise"). Idempotent;
-- lockwise runs it under an advisory lock, so processes that start together do not collide.
-- {schema} is replaced by the quoted, validated schema name.

CREATE SCHEMA IF NOT EXISTS {schema};

-- Fencing tokens for session- and transaction-scoped locks: one sequence, so tokens of both
-- scopes are comparable, strictly increase, and are never reissued (nextval ignores rollback).
CREATE SEQUENCE IF NOT EXISTS {schema}.fence_seq;

-- The highest token each fenced resource has accepted.
CREATE TABLE IF NOT EXISTS {schema}.fence (
    resource   text PRIMARY KEY,
    token      bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Accepts p_token if it is >= the highest accepted for p_resource (one grant may write many
-- times) and records it; otherwise raises SQLSTATE LW409, which aborts the caller's transaction.
-- The row lock taken by ON CONFLICT serializes writers of one resource until commit.
CREATE OR REPLACE FUNCTION {schema}.fence(p_resource text, p_token bigint) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    accepted bigint;
BEGIN
    INSERT INTO {schema}.fence AS f (resource, token) VALUES (p_resource, p_token)
    ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, updated_at = now()
        WHERE f.token <= EXCLUDED.token
    RETURNING f.token INTO accepted;
    IF accepted IS NULL THEN
        SELECT f.token INTO accepted FROM {schema}.fence f WHERE f.resource = p_resource;
        RAISE EXCEPTION 'stale fencing token % for resource %: % was already accepted',
            p_token, p_resource, accepted
            USING ERRCODE = 'LW409', DETAIL = accepted::text;
    END IF;
    RETURN accepted;
END
$fn$;

-- Markers of effects that ran once: the unique key decides, not a lock.
CREATE TABLE IF NOT EXISTS {schema}.once (
    scope   text NOT NULL,
    key     text NOT NULL,
    done_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);

-- Who holds each session-scoped lock, for `lockwise locks`: written by the grant, in the same
-- statement. One row per server session (a session holds one lock at a time), telling the
-- truth only while pg_locks shows that session holding that key's advisory lock; a later
-- grant on the session overwrites it. Unlogged: none of it must survive a crash.
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
