-- Queue tables, version 2: a claimed job is not started until its worker confirms it
-- (confirm_started.sql), so that the reaper can tell a claim whose answer was lost (no
-- execution: the attempt is not counted) from an execution that ran out of lease. Rows of
-- version 1 were started when claimed: they default to 1. Outside the window between a claim
-- and its confirmation the column is always 1, so version-1 workers keep the old semantics.
-- Applied when the column is missing (MySQL DDL is not transactional: the check, not a
-- version row, makes it idempotent). {jobs} is the validated table name.
ALTER TABLE {jobs} ADD COLUMN started TINYINT(1) NOT NULL DEFAULT 1
