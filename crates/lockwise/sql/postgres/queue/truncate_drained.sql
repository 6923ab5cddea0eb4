-- Truncates the drained segments of one ring that are still empty once locked (v4.sql's
-- function); returns how many. $1 the ring ('ready' or 'leases'), $2 the segments (integer[]),
-- $3 the lockwise advisory class.
SELECT {schema}.truncate_drained($1, $2, $3)
