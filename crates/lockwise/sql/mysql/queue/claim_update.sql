-- Claim, step 2 of 3: leases the locked jobs to the worker and counts the attempt; they are
-- not started until the worker confirms them (confirm_started.sql).
-- ? lease (µs), ? worker, then the ids; {ids} is one `?` per id, filled in at run time.
UPDATE {jobs} SET state = 'running', attempt = attempt + 1, started = 0,
       lease_until = NOW(6) + INTERVAL ? MICROSECOND, worker = ?
 WHERE id IN ({ids})
