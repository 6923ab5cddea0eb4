-- Queue schema, version 2: a claimed job is not started until its worker confirms it
-- (confirm_started.sql), so that the reaper can tell a claim whose answer was lost (no
-- execution: the attempt is not counted) from an execution that ran out of lease. Rows of
-- version 1 were started when claimed: they default to true. Outside the window between a
-- claim and its confirmation the column is always true, so version-1 workers still see the
-- old semantics. {schema} is the quoted, validated schema name.
ALTER TABLE {schema}.jobs ADD COLUMN started boolean NOT NULL DEFAULT true;
