-- Removes a group's roster.
--
-- ?  the group
DELETE FROM lockwise_partition_roster WHERE grp = ?
