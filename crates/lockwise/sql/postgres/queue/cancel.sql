-- Cancels a job of any queue in the schema that has not finished: ready, scheduled or
-- running. A running job's worker finds it gone at its next heartbeat and stops the handler;
-- its completion or failure, compare-and-set on state 'running', changes nothing. $1 id
UPDATE {schema}.jobs
   SET state = 'cancelled', finished_at = now(), lease_until = NULL
 WHERE id = $1 AND state IN ('available', 'running')
