-- Stores a group's first roster as version 1, unless one exists (then nothing changes).
--
-- ?  the group
-- ?  the roster text
INSERT IGNORE INTO lockwise_partition_roster (grp, version, roster) VALUES (?, 1, ?)
