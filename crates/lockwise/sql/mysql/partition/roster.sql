-- The rosters of partition groups: one row per group, replaced only by compare-and-swap on
-- `version` (see src/partition/roster.rs for the text form of `roster`).
CREATE TABLE IF NOT EXISTS lockwise_partition_roster (
    grp     VARBINARY(255) PRIMARY KEY,
    version BIGINT NOT NULL,
    roster  MEDIUMTEXT NOT NULL
)
