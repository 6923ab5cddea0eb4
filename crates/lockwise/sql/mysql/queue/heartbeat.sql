-- Extends the leases of jobs a worker still runs (compare-and-set on id and attempt).
-- ? lease (µs), then (id, attempt) pairs; {pairs} is one `(?,?)` per job, filled in at run time.
UPDATE {jobs} SET lease_until = NOW(6) + INTERVAL ? MICROSECOND
 WHERE state = 'running' AND (id, attempt) IN ({pairs})
