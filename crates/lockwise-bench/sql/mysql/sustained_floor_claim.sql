-- The floor's claim, in a READ COMMITTED transaction followed by sustained_floor_start.sql:
-- the first ten available jobs, locked past the ones other claims hold. {jobs} is the
-- validated table name. ? queue
SELECT id FROM {jobs}
 WHERE queue = ? AND state = 'available'
 ORDER BY priority, run_at, id
 LIMIT 10
 FOR UPDATE SKIP LOCKED
