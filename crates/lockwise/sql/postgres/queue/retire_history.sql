-- Retention's upkeep of the finished history's ring (v11.sql): moves its clock on when due, and
-- truncates the segments whose every job is pruned; returns how many. $1 the span of a segment
-- (seconds), $2 the lockwise advisory class, $3 how long to wait for a segment's lock in ms
-- (0: NOWAIT).
SELECT {schema}.retire_history($1, $2, $3)
