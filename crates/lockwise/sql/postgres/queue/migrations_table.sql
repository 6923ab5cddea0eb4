-- Creates the schema and its table of applied queue migrations if missing. Run as one
-- batch (several statements, no parameters), inside Queue::migrate's transaction.
-- {schema} is the quoted, validated schema name.
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.queue_migrations
    (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
