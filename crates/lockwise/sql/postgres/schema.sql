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
