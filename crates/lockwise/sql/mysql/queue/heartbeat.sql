-- Extends the leases of jobs a worker still runs (compare-and-set on id and attempt).
-- ? lease (µs), then (id, attempt) pairs; {pairs} is one `(?,?)` per job, filled in at run time.
-- FORCE INDEX (PRIMARY): locked by id, in id order (see complete.sql).
UPDATE {jobs} FORCE INDEX (PRIMARY) SET lease_until = NOW(6) + INTERVAL ? MICROSECOND
 WHERE state = 'running' AND (id, attempt) IN ({pairs})
