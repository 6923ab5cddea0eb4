-- A group's roster and its version.
--
-- ?  the group
SELECT version, roster FROM lockwise_partition_roster WHERE grp = ?
