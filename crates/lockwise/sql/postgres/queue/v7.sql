-- Queue schema, version 7: the acknowledgement and the confirmation of a batch probe each
-- job's lease by its id alone, and a claim deletes each chosen job from its own ready
-- segment. {schema} is the quoted, validated schema name.
--
-- Their statements (ack.sql, confirm_started.sql) also said `l.id = ANY(ids)` beside
-- `l.id = f.id`. In the plan, a nested loop over the batch with an index scan of the lease
-- segment, that put both conditions in the index scan: each of the batch's probes sorted and
-- deduplicated the whole array again (PostgreSQL prepares array keys on every rescan), a
-- hundred sorts of a hundred ids per statement. Without it each probe is one index lookup:
-- draining 10k no-op jobs went from 16.0k to 17.9k jobs/s (median of 16 drains each,
-- alternating).
--
-- The claim deleted the chosen jobs through the ready ring's parent by row address, and a row
-- address means nothing outside its segment: each of the hundred addresses was looked up in
-- all sixteen segments (PostgreSQL 15 does not prune partitions at run time for a DELETE),
-- and the rows found had to be told apart by id against the whole batch. Now each segment's
-- DELETE gets the addresses of its own rows only (claim_moved.sql).
--
-- And an acknowledgement locks its jobs' leases segment by segment in ascending order, each
-- in id order, the order in which a heartbeat and a hand-back now lock them (ack.sql,
-- locked_leases.sql): under sustained load an acknowledgement (riding a claim) and a
-- heartbeat of jobs that had just finished locked two leases in opposite orders, a deadlock
-- that stalled both for `deadlock_timeout` (1 s) before the claim failed.
--
-- The functions of version 5 are replaced with the same text otherwise, their grants kept.

-- Acknowledges finished jobs (moves them to done); returns how many. $1 ids, $2 attempts,
-- $3 their lease segments.
CREATE OR REPLACE FUNCTION {schema}.ack(bigint[], integer[], smallint[])
RETURNS bigint
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    k smallint;
    moved bigint;
    total bigint := 0;
BEGIN
    FOR k IN SELECT DISTINCT u.seg FROM unnest($1, $3) AS u(id, seg) ORDER BY 1 LOOP
IF k IS NULL THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg IS NULL
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 0 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_0 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 0
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_0 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 1 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_1 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 1
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_1 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 2 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_2 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 2
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_2 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 3 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_3 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 3
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_3 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 4 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_4 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 4
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_4 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 5 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_5 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 5
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_5 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 6 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_6 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 6
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_6 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 7 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_7 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 7
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_7 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 8 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_8 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 8
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_8 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 9 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_9 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 9
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_9 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 10 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_10 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 10
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_10 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 11 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_11 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 11
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_11 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 12 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_12 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 12
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_12 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 13 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_13 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 13
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_13 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 14 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_14 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 14
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_14 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 15 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_15 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 15
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_15 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 16 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_16 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 16
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_16 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 17 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_17 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 17
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_17 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 18 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_18 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 18
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_18 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 19 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_19 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 19
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_19 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 20 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_20 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 20
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_20 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 21 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_21 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 21
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_21 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 22 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_22 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 22
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_22 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 23 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_23 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 23
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_23 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 24 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_24 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 24
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_24 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 25 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_25 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 25
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_25 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 26 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_26 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 26
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_26 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 27 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_27 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 27
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_27 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 28 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_28 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 28
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_28 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 29 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_29 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 29
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_29 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 30 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_30 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 30
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_30 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 31 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_31 l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 31
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_31 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSE
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases l
      JOIN unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = k
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

END IF;
    END LOOP;
    RETURN total;
END
$fn$;

-- Acknowledges the finished jobs $5 (attempts $6, lease segments $7), then claims (claim.sql).
CREATE OR REPLACE FUNCTION {schema}.claim(text, bigint, float8, text, bigint[], integer[], smallint[])
RETURNS TABLE (claimed_id bigint, claimed_queue text, claimed_payload jsonb,
               claimed_attempt integer, claimed_max_attempts integer, claimed_seg smallint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
DECLARE
    k smallint;
    moved bigint;
    total bigint := 0;
BEGIN
    FOR k IN SELECT DISTINCT u.seg FROM unnest($5, $7) AS u(id, seg) ORDER BY 1 LOOP
IF k IS NULL THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg IS NULL
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 0 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_0 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 0
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_0 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 1 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_1 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 1
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_1 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 2 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_2 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 2
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_2 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 3 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_3 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 3
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_3 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 4 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_4 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 4
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_4 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 5 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_5 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 5
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_5 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 6 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_6 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 6
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_6 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 7 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_7 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 7
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_7 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 8 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_8 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 8
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_8 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 9 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_9 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 9
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_9 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 10 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_10 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 10
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_10 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 11 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_11 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 11
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_11 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 12 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_12 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 12
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_12 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 13 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_13 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 13
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_13 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 14 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_14 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 14
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_14 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 15 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_15 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 15
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_15 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 16 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_16 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 16
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_16 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 17 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_17 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 17
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_17 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 18 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_18 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 18
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_18 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 19 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_19 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 19
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_19 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 20 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_20 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 20
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_20 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 21 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_21 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 21
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_21 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 22 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_22 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 22
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_22 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 23 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_23 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 23
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_23 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 24 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_24 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 24
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_24 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 25 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_25 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 25
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_25 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 26 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_26 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 26
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_26 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 27 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_27 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 27
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_27 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 28 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_28 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 28
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_28 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 29 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_29 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 29
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_29 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 30 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_30 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 30
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_30 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 31 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_31 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 31
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_31 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSE
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = k
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

END IF;
    END LOOP;
    RETURN QUERY
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
moved_0 AS (
    DELETE FROM {schema}.ready_0 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 0))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_1 AS (
    DELETE FROM {schema}.ready_1 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 1))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_2 AS (
    DELETE FROM {schema}.ready_2 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 2))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_3 AS (
    DELETE FROM {schema}.ready_3 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 3))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_4 AS (
    DELETE FROM {schema}.ready_4 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 4))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_5 AS (
    DELETE FROM {schema}.ready_5 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 5))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_6 AS (
    DELETE FROM {schema}.ready_6 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 6))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_7 AS (
    DELETE FROM {schema}.ready_7 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 7))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_8 AS (
    DELETE FROM {schema}.ready_8 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 8))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_9 AS (
    DELETE FROM {schema}.ready_9 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 9))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_10 AS (
    DELETE FROM {schema}.ready_10 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 10))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_11 AS (
    DELETE FROM {schema}.ready_11 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 11))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_12 AS (
    DELETE FROM {schema}.ready_12 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 12))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_13 AS (
    DELETE FROM {schema}.ready_13 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 13))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_14 AS (
    DELETE FROM {schema}.ready_14 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 14))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_15 AS (
    DELETE FROM {schema}.ready_15 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 15))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved AS (
    SELECT * FROM moved_0
    UNION ALL SELECT * FROM moved_1
    UNION ALL SELECT * FROM moved_2
    UNION ALL SELECT * FROM moved_3
    UNION ALL SELECT * FROM moved_4
    UNION ALL SELECT * FROM moved_5
    UNION ALL SELECT * FROM moved_6
    UNION ALL SELECT * FROM moved_7
    UNION ALL SELECT * FROM moved_8
    UNION ALL SELECT * FROM moved_9
    UNION ALL SELECT * FROM moved_10
    UNION ALL SELECT * FROM moved_11
    UNION ALL SELECT * FROM moved_12
    UNION ALL SELECT * FROM moved_13
    UNION ALL SELECT * FROM moved_14
    UNION ALL SELECT * FROM moved_15
),
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
;
END
$fn$;

-- The same for a worker of several queues (claim_any.sql).
CREATE OR REPLACE FUNCTION {schema}.claim_any(text[], bigint, float8, text, bigint[], integer[], smallint[])
RETURNS TABLE (claimed_id bigint, claimed_queue text, claimed_payload jsonb,
               claimed_attempt integer, claimed_max_attempts integer, claimed_seg smallint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
DECLARE
    k smallint;
    moved bigint;
    total bigint := 0;
BEGIN
    FOR k IN SELECT DISTINCT u.seg FROM unnest($5, $7) AS u(id, seg) ORDER BY 1 LOOP
IF k IS NULL THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg IS NULL
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 0 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_0 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 0
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_0 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 1 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_1 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 1
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_1 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 2 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_2 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 2
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_2 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 3 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_3 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 3
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_3 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 4 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_4 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 4
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_4 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 5 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_5 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 5
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_5 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 6 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_6 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 6
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_6 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 7 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_7 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 7
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_7 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 8 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_8 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 8
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_8 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 9 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_9 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 9
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_9 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 10 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_10 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 10
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_10 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 11 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_11 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 11
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_11 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 12 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_12 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 12
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_12 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 13 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_13 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 13
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_13 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 14 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_14 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 14
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_14 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 15 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_15 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 15
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_15 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 16 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_16 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 16
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_16 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 17 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_17 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 17
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_17 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 18 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_18 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 18
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_18 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 19 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_19 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 19
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_19 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 20 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_20 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 20
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_20 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 21 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_21 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 21
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_21 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 22 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_22 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 22
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_22 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 23 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_23 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 23
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_23 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 24 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_24 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 24
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_24 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 25 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_25 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 25
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_25 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 26 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_26 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 26
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_26 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 27 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_27 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 27
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_27 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 28 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_28 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 28
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_28 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 29 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_29 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 29
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_29 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 30 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_30 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 30
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_30 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSIF k = 31 THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases_31 l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 31
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases_31 l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

ELSE
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases l
      JOIN unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = k
     ORDER BY l.id
       FOR UPDATE OF l
),
acked AS (
    DELETE FROM {schema}.leases l
     USING locked k
     WHERE l.id = k.id
    RETURNING l.*
)
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors)
SELECT id, queue, 'done', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors
  FROM acked;
GET DIAGNOSTICS moved = ROW_COUNT;
total := total + moved;

END IF;
    END LOOP;
    RETURN QUERY
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
moved_0 AS (
    DELETE FROM {schema}.ready_0 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 0))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_1 AS (
    DELETE FROM {schema}.ready_1 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 1))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_2 AS (
    DELETE FROM {schema}.ready_2 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 2))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_3 AS (
    DELETE FROM {schema}.ready_3 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 3))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_4 AS (
    DELETE FROM {schema}.ready_4 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 4))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_5 AS (
    DELETE FROM {schema}.ready_5 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 5))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_6 AS (
    DELETE FROM {schema}.ready_6 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 6))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_7 AS (
    DELETE FROM {schema}.ready_7 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 7))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_8 AS (
    DELETE FROM {schema}.ready_8 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 8))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_9 AS (
    DELETE FROM {schema}.ready_9 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 9))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_10 AS (
    DELETE FROM {schema}.ready_10 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 10))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_11 AS (
    DELETE FROM {schema}.ready_11 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 11))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_12 AS (
    DELETE FROM {schema}.ready_12 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 12))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_13 AS (
    DELETE FROM {schema}.ready_13 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 13))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_14 AS (
    DELETE FROM {schema}.ready_14 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 14))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved_15 AS (
    DELETE FROM {schema}.ready_15 r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = 15))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
moved AS (
    SELECT * FROM moved_0
    UNION ALL SELECT * FROM moved_1
    UNION ALL SELECT * FROM moved_2
    UNION ALL SELECT * FROM moved_3
    UNION ALL SELECT * FROM moved_4
    UNION ALL SELECT * FROM moved_5
    UNION ALL SELECT * FROM moved_6
    UNION ALL SELECT * FROM moved_7
    UNION ALL SELECT * FROM moved_8
    UNION ALL SELECT * FROM moved_9
    UNION ALL SELECT * FROM moved_10
    UNION ALL SELECT * FROM moved_11
    UNION ALL SELECT * FROM moved_12
    UNION ALL SELECT * FROM moved_13
    UNION ALL SELECT * FROM moved_14
    UNION ALL SELECT * FROM moved_15
),
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
;
END
$fn$;

-- Confirms the start of claimed jobs (confirm_started.sql); returns their ids. $1 ids,
-- $2 attempts, $3 their lease segments.
CREATE OR REPLACE FUNCTION {schema}.confirm_started(bigint[], integer[], smallint[])
RETURNS SETOF bigint
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    k smallint;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    FOR k IN SELECT DISTINCT u.seg FROM unnest($1, $3) AS u(id, seg) ORDER BY 1 LOOP
IF k IS NULL THEN
RETURN QUERY
UPDATE {schema}.leases l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg IS NULL
RETURNING l.id;

ELSIF k = 0 THEN
RETURN QUERY
UPDATE {schema}.leases_0 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 0
RETURNING l.id;

ELSIF k = 1 THEN
RETURN QUERY
UPDATE {schema}.leases_1 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 1
RETURNING l.id;

ELSIF k = 2 THEN
RETURN QUERY
UPDATE {schema}.leases_2 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 2
RETURNING l.id;

ELSIF k = 3 THEN
RETURN QUERY
UPDATE {schema}.leases_3 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 3
RETURNING l.id;

ELSIF k = 4 THEN
RETURN QUERY
UPDATE {schema}.leases_4 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 4
RETURNING l.id;

ELSIF k = 5 THEN
RETURN QUERY
UPDATE {schema}.leases_5 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 5
RETURNING l.id;

ELSIF k = 6 THEN
RETURN QUERY
UPDATE {schema}.leases_6 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 6
RETURNING l.id;

ELSIF k = 7 THEN
RETURN QUERY
UPDATE {schema}.leases_7 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 7
RETURNING l.id;

ELSIF k = 8 THEN
RETURN QUERY
UPDATE {schema}.leases_8 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 8
RETURNING l.id;

ELSIF k = 9 THEN
RETURN QUERY
UPDATE {schema}.leases_9 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 9
RETURNING l.id;

ELSIF k = 10 THEN
RETURN QUERY
UPDATE {schema}.leases_10 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 10
RETURNING l.id;

ELSIF k = 11 THEN
RETURN QUERY
UPDATE {schema}.leases_11 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 11
RETURNING l.id;

ELSIF k = 12 THEN
RETURN QUERY
UPDATE {schema}.leases_12 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 12
RETURNING l.id;

ELSIF k = 13 THEN
RETURN QUERY
UPDATE {schema}.leases_13 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 13
RETURNING l.id;

ELSIF k = 14 THEN
RETURN QUERY
UPDATE {schema}.leases_14 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 14
RETURNING l.id;

ELSIF k = 15 THEN
RETURN QUERY
UPDATE {schema}.leases_15 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 15
RETURNING l.id;

ELSIF k = 16 THEN
RETURN QUERY
UPDATE {schema}.leases_16 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 16
RETURNING l.id;

ELSIF k = 17 THEN
RETURN QUERY
UPDATE {schema}.leases_17 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 17
RETURNING l.id;

ELSIF k = 18 THEN
RETURN QUERY
UPDATE {schema}.leases_18 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 18
RETURNING l.id;

ELSIF k = 19 THEN
RETURN QUERY
UPDATE {schema}.leases_19 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 19
RETURNING l.id;

ELSIF k = 20 THEN
RETURN QUERY
UPDATE {schema}.leases_20 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 20
RETURNING l.id;

ELSIF k = 21 THEN
RETURN QUERY
UPDATE {schema}.leases_21 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 21
RETURNING l.id;

ELSIF k = 22 THEN
RETURN QUERY
UPDATE {schema}.leases_22 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 22
RETURNING l.id;

ELSIF k = 23 THEN
RETURN QUERY
UPDATE {schema}.leases_23 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 23
RETURNING l.id;

ELSIF k = 24 THEN
RETURN QUERY
UPDATE {schema}.leases_24 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 24
RETURNING l.id;

ELSIF k = 25 THEN
RETURN QUERY
UPDATE {schema}.leases_25 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 25
RETURNING l.id;

ELSIF k = 26 THEN
RETURN QUERY
UPDATE {schema}.leases_26 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 26
RETURNING l.id;

ELSIF k = 27 THEN
RETURN QUERY
UPDATE {schema}.leases_27 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 27
RETURNING l.id;

ELSIF k = 28 THEN
RETURN QUERY
UPDATE {schema}.leases_28 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 28
RETURNING l.id;

ELSIF k = 29 THEN
RETURN QUERY
UPDATE {schema}.leases_29 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 29
RETURNING l.id;

ELSIF k = 30 THEN
RETURN QUERY
UPDATE {schema}.leases_30 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 30
RETURNING l.id;

ELSIF k = 31 THEN
RETURN QUERY
UPDATE {schema}.leases_31 l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = 31
RETURNING l.id;

ELSE
RETURN QUERY
UPDATE {schema}.leases l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND f.seg = k
RETURNING l.id;

END IF;
    END LOOP;
END
$fn$;

