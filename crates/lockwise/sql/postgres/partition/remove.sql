-- Removes a group's roster.
--
-- $1  the group
DELETE FROM {schema}.partition_roster WHERE grp = $1
