-- Acknowledges the jobs a worker finished and claims its next batch, in one round trip.
-- The claim locks at most $2 available rows with SKIP LOCKED in a MATERIALIZED CTE, then
-- updates exactly those: never the `WHERE id IN (SELECT … LIMIT n)` form, which some plans
-- evaluate more than once and so update more than n rows.
-- $1 queue, $2 batch size, $3 lease (seconds), $4 worker id,
-- $5 finished job ids, $6 their attempts (completion is compare-and-set on id and attempt).
-- Claimed jobs are not started until the worker confirms them (confirm_started.sql).
WITH done AS (
    UPDATE {schema}.jobs j
       SET state = 'done', finished_at = now(), lease_until = NULL
      FROM unnest($5::bigint[], $6::int[]) AS f(id, attempt)
     WHERE j.id = f.id AND j.attempt = f.attempt AND j.state = 'running'
    RETURNING j.id
),
next AS MATERIALIZED (
    SELECT id
      FROM {schema}.jobs
     WHERE state = 'available' AND queue = $1 AND run_at <= now()
     ORDER BY priority, run_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
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
