-- Cancels a job of any queue in these tables that has not finished: ready, scheduled or
-- running. A running job's worker finds it gone at its next heartbeat and stops the handler;
-- its completion or failure, compare-and-set on state 'running', changes nothing. ? id
UPDATE {jobs} SET state = 'cancelled', finished_at = NOW(6), lease_until = NULL
 WHERE id = ? AND state IN ('available', 'running')
