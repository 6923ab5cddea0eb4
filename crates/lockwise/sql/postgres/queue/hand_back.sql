-- Graceful shutdown: gives unfinished jobs back to ready at once. The attempt stays counted
-- (it is the job's fencing token) and the budget grows by one, so a shutdown never uses up a
-- job's attempts. The leases are locked first, in (segment, id) order, the order of a
-- heartbeat (heartbeat.sql), which may still be in flight for the same jobs: the two never
-- deadlock. $1 ids, $2 attempts
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases l
      JOIN unnest($1::bigint[], $2::int[]) AS r(id, attempt)
        ON l.id = r.id AND l.attempt = r.attempt
     ORDER BY l.seg, l.id
       FOR UPDATE OF l
),
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
