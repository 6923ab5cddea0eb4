-- One branch of the acknowledgement in the functions {schema}.ack, claim and claim_any
-- (v5.sql): a change here needs a migration that replaces them.
-- Moves the finished jobs of one lease segment from leases to done (compare-and-set on id
-- and attempt). {leases} is the segment's table, `{schema}.leases_<k>`, whose rows are
-- those of `{segment}` (`f.seg = <k>`); for jobs whose segment is not known it is the whole
-- ring, `{schema}.leases`, and `f.seg IS NULL` (or `f.seg = k` for a segment that is not
-- the ring's). Naming the segment keeps the statement off the other segments, so that a
-- truncation of one waits for none of it.
-- {ids} finished job ids, {attempts} their attempts, {segs} their lease segments (parameters
-- of the function, filled in at migration).
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {leases} l
      JOIN unnest({ids}::bigint[], {attempts}::int[], {segs}::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND {segment}
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {leases} l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked
