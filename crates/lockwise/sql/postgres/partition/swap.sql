-- Stores a group's roster as version $2 + 1 if its version is still $2 (0: no row yet).
-- One row back when stored, none when the version differed (nothing changed).
--
-- $1  the group
-- $2  the expected version
-- $3  the new roster text
INSERT INTO {schema}.partition_roster AS r (grp, version, roster)
SELECT $1, 1, $3 WHERE $2 = 0
ON CONFLICT (grp) DO NOTHING
RETURNING r.version
