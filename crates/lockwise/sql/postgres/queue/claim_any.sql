-- The claim of the function {schema}.claim_any (v5.sql), after its acknowledgements
-- (ack.sql), called by claim_any_call.sql: a change here needs a migration that replaces the
-- function.
-- claim.sql for a worker of several queues: $1 is their names (text[]), the other parameters
-- are claim.sql's. For each queue, at most $2 of its due jobs are locked in the claim
-- index's order (SKIP LOCKED); the $2 first of them all are claimed. The others stay locked
-- until the statement ends, a few milliseconds during which other claimers skip them.
WITH next AS MATERIALIZED (
    SELECT false AS delayed, c.id, c.seg, c.tid, c.priority, c.run_at
      FROM unnest($1::text[]) AS q(name)
     CROSS JOIN LATERAL (
        SELECT id, seg, ctid AS tid, priority, run_at
          FROM {schema}.ready
         WHERE queue = q.name AND run_at <= now()
         ORDER BY priority, run_at, id
         LIMIT $2
           FOR UPDATE SKIP LOCKED
     ) c
),
came_due AS MATERIALIZED (
    SELECT true AS delayed, id, NULL::smallint AS seg, NULL::tid AS tid, priority, run_at
      FROM {schema}.scheduled
     WHERE queue = ANY($1::text[]) AND run_at <= now()
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
