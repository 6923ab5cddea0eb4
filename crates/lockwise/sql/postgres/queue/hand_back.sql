-- Graceful shutdown: gives unfinished jobs back to ready at once. The attempt stays counted
-- (it is the job's fencing token) and the budget grows by one, so a shutdown never uses up a
-- job's attempts. $1 ids, $2 attempts
WITH back AS (
    DELETE FROM {schema}.leases l
     USING unnest($1::bigint[], $2::int[]) AS r(id, attempt)
     WHERE l.id = ANY($1::bigint[]) AND l.id = r.id AND l.attempt = r.attempt
    RETURNING l.*
)
INSERT INTO {schema}.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                            idempotency_key, created_at, last_error, errors)
SELECT id, queue, priority, now(), payload, attempt, max_attempts + 1, idempotency_key,
       created_at, last_error, errors
  FROM back
RETURNING id
