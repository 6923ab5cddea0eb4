-- Graceful shutdown: gives unfinished jobs back to ready at once. The attempt stays counted
-- (it is the job's fencing token) and the budget grows by one, so a shutdown never uses up a
-- job's attempts. The leases are locked first in the order of locked_leases.sql: a heartbeat
-- may still be in flight for the same jobs. $1 ids, $2 attempts
WITH {locked_leases},
back AS (
    DELETE FROM {schema}.leases l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                            idempotency_key, created_at, last_error, errors)
SELECT id, queue, priority, now(), payload, attempt, max_attempts + 1, idempotency_key,
       created_at, last_error, errors
  FROM back
RETURNING id
