-- The claim of the function {schema}.claim (v5.sql), after its acknowledgements (ack.sql),
-- called by claim_call.sql: a change here needs a migration that replaces the function.
-- Locks at most $2 due jobs with SKIP LOCKED in a MATERIALIZED CTE, in the claim index's
-- order across the ready ring (a merge of its segments' indexes), then moves exactly those
-- into leases with the attempt raised by one, each deleted from its own ready segment by row
-- address (claim_moved.sql): never the `WHERE id IN (SELECT … LIMIT n)` form, which some
-- plans evaluate more than once. Delayed jobs that came due are claimed
-- straight from scheduled, in the same order. Each claimed job comes back with its lease
-- segment (`seg`), which the worker's acknowledgement and confirmation name.
-- $1 queue, $2 batch size, $3 lease (seconds), $4 worker id.
-- Claimed jobs are not started until the worker confirms them (confirm_started.sql).
WITH next AS MATERIALIZED (
    SELECT false AS delayed, id, seg, ctid AS tid, priority, run_at
      FROM {schema}.ready
     WHERE queue = $1 AND run_at <= now()
     ORDER BY priority, run_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
),
came_due AS MATERIALIZED (
    SELECT true AS delayed, id, NULL::smallint AS seg, NULL::tid AS tid, priority, run_at
      FROM {schema}.scheduled
     WHERE queue = $1 AND run_at <= now()
     ORDER BY priority, run_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
),
chosen AS MATERIALIZED (
    SELECT delayed, id, seg, tid FROM (SELECT * FROM next UNION ALL SELECT * FROM came_due) c
     ORDER BY priority, run_at, id
     LIMIT $2
),
{moved}
promoted AS (
    DELETE FROM {schema}.scheduled s
     WHERE s.id = ANY ((SELECT array_agg(id) FROM chosen WHERE delayed)::bigint[])
    RETURNING s.id, s.queue, s.priority, s.run_at, s.payload, s.attempt, s.max_attempts,
              s.idempotency_key, s.created_at, s.last_error, s.errors
)
INSERT INTO {schema}.leases (id, queue, priority, run_at, payload, attempt, max_attempts,
                             idempotency_key, created_at, last_error, errors, lease_until,
                             worker)
SELECT id, queue, priority, run_at, payload, attempt + 1, max_attempts, idempotency_key,
       created_at, last_error, errors, now() + make_interval(secs => $3), $4
  FROM (SELECT * FROM moved UNION ALL SELECT * FROM promoted) m
 ORDER BY priority, run_at, id
RETURNING id, queue, payload, attempt, max_attempts, seg
