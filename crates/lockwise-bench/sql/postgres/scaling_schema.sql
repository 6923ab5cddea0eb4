-- The lesson's job table for exercise 3 (lock-guarded queue against SKIP LOCKED), in the
-- bench's own schema. {schema} is the quoted, validated schema name. Several statements.
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.jobs (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    state      text        NOT NULL DEFAULT 'pending',
    worker     text,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    started_at timestamptz,
    payload    jsonb       NOT NULL DEFAULT '{}'
) WITH (autovacuum_enabled = false); -- so that the dead tuples a run leaves can be counted
CREATE INDEX IF NOT EXISTS jobs_pending ON {schema}.jobs (created_at) WHERE state = 'pending';
