-- Marks jobs done: moves them from leases to done, compare-and-set on (id, attempt), so a
-- worker whose job was rescued cannot complete it late. $1 ids, $2 attempts
WITH acked AS (
    DELETE FROM {schema}.leases l
     USING unnest($1::bigint[], $2::int[]) AS f(id, attempt)
     WHERE l.id = ANY($1::bigint[]) AND l.id = f.id AND l.attempt = f.attempt
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked
