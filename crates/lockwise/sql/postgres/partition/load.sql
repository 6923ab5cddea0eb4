-- A group's roster and its version.
--
-- $1  the group
SELECT version, roster FROM {schema}.partition_roster WHERE grp = $1
