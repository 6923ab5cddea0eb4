-- Replaces a group's roster if its version is still $2 (see swap.sql for version 0).
-- One row back when stored, none when the version differed (nothing changed).
--
-- $1  the group
-- $2  the expected version (at least 1)
-- $3  the new roster text
UPDATE {schema}.partition_roster SET version = version + 1, roster = $3
WHERE grp = $1 AND version = $2
RETURNING version
