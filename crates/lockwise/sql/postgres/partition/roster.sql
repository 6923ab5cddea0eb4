-- The rosters of partition groups: one row per group, replaced only by compare-and-swap on
-- `version` (see src/partition/roster.rs for the text form of `roster`).
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.partition_roster (
    grp     text PRIMARY KEY,
    version bigint NOT NULL,
    roster  text NOT NULL
);
