-- Truncates the drained segments of one ring that are still empty once locked (v6.sql's
-- function); returns how many. $1 the ring ('ready' or 'leases'), $2 the segments (integer[]),
-- $3 the lockwise advisory class, $4 how long to wait for each segment's lock in ms (0:
-- NOWAIT).
-- flush_stats (v12.sql): the statement's table statistics are reported when it ends.
SELECT {schema}.truncate_drained($1, $2, $3, $4) FROM {schema}.flush_stats()
