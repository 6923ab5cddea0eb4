-- claim.sql for a worker of several queues: $1 is their names (text[]), the other parameters
-- are claim.sql's. For each queue, at most $2 of its ready jobs are locked in the claim
-- index's order (SKIP LOCKED); the $2 first of them all are claimed. The others stay locked
-- until the statement ends, a few milliseconds during which other claimers skip them.
WITH done AS (
    UPDATE {schema}.jobs j
       SET state = 'done', finished_at = now(), lease_until = NULL
      FROM unnest($5::bigint[], $6::int[]) AS f(id, attempt)
     WHERE j.id = f.id AND j.attempt = f.attempt AND j.state = 'running'
    RETURNING j.id
),
next AS MATERIALIZED (
    SELECT c.id
      FROM unnest($1::text[]) AS q(name)
     CROSS JOIN LATERAL (
        SELECT id, priority, run_at
          FROM {schema}.jobs
         WHERE state = 'available' AND queue = q.name AND run_at <= now()
         ORDER BY priority, run_at, id
         LIMIT $2
           FOR UPDATE SKIP LOCKED
     ) c
     ORDER BY c.priority, c.run_at, c.id
     LIMIT $2
)
UPDATE {schema}.jobs j
   SET state = 'running',
       attempt = j.attempt + 1,
       started = false,
       lease_until = now() + make_interval(secs => $3),
       worker = $4
  FROM next
 WHERE j.id = next.id
RETURNING j.id, j.queue, j.payload, j.attempt, j.max_attempts,
          (SELECT count(*) FROM done) AS acknowledged
