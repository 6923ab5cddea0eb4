-- Replaces a group's roster if its version is still the expected one (one row changed).
--
-- ?  the new roster text
-- ?  the group
-- ?  the expected version (at least 1)
UPDATE lockwise_partition_roster SET version = version + 1, roster = ?
WHERE grp = ? AND version = ?
