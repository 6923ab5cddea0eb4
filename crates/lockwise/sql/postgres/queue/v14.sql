-- Queue schema, version 14: each claimed job comes back with how long it waited, from when it
-- became due (its enqueue, or the time its delay or retry came) to its claim, in seconds by
-- the server's clock (`claimed_waited`): the worker's `lockwise_job_wait_seconds`. {schema} is
-- the quoted, validated schema name.
--
-- The functions are version 9's with that one column more, in the last RETURNING. A function's
-- result type cannot be replaced, so each one is renamed, created again, given the EXECUTE
-- grants of the one it replaces, and the old one dropped, all in the migration's transaction:
-- a process of an earlier version names the columns it reads (claim_call.sql), and keeps
-- claiming with the new functions.
ALTER FUNCTION {schema}.claim(text, bigint, float8, text, bigint[], integer[], smallint[]) RENAME TO claim_v9;
ALTER FUNCTION {schema}.claim_any(text[], bigint, float8, text, bigint[], integer[], smallint[]) RENAME TO claim_any_v9;

-- Acknowledges the finished jobs $5 (attempts $6, lease segments $7), then claims (claim.sql).
CREATE FUNCTION {schema}.claim(text, bigint, float8, text, bigint[], integer[], smallint[])
RETURNS TABLE (claimed_id bigint, claimed_queue text, claimed_payload jsonb,
               claimed_attempt integer, claimed_max_attempts integer, claimed_seg smallint,
               claimed_waited float8)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
DECLARE
    k smallint;
    moved bigint;
    total bigint := 0;
    segs smallint[] := $7;
BEGIN
    IF EXISTS (SELECT FROM unnest(segs) s WHERE s IS NULL OR s NOT BETWEEN 0 AND 31) THEN
        segs := ARRAY(
    SELECT CASE WHEN u.seg BETWEEN 0 AND 31 THEN u.seg
                ELSE (SELECT l.seg
                        FROM {schema}.leases l
                       WHERE l.id = u.id AND l.attempt = u.attempt)
           END
      FROM unnest($5::bigint[], $6::int[], $7::smallint[])
           WITH ORDINALITY AS u(id, attempt, seg, n)
     ORDER BY u.n
);
    END IF;
    FOR k IN SELECT DISTINCT u.seg FROM unnest($5, segs) AS u(id, seg) ORDER BY 1 LOOP
IF k IS NULL THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases l
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
RETURNING id, queue, payload, attempt, max_attempts, seg,
          greatest(extract(epoch FROM now() - run_at), 0)::float8
;
END
$fn$;

-- The same for a worker of several queues (claim_any.sql).
CREATE FUNCTION {schema}.claim_any(text[], bigint, float8, text, bigint[], integer[], smallint[])
RETURNS TABLE (claimed_id bigint, claimed_queue text, claimed_payload jsonb,
               claimed_attempt integer, claimed_max_attempts integer, claimed_seg smallint,
               claimed_waited float8)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
DECLARE
    k smallint;
    moved bigint;
    total bigint := 0;
    segs smallint[] := $7;
BEGIN
    IF EXISTS (SELECT FROM unnest(segs) s WHERE s IS NULL OR s NOT BETWEEN 0 AND 31) THEN
        segs := ARRAY(
    SELECT CASE WHEN u.seg BETWEEN 0 AND 31 THEN u.seg
                ELSE (SELECT l.seg
                        FROM {schema}.leases l
                       WHERE l.id = u.id AND l.attempt = u.attempt)
           END
      FROM unnest($5::bigint[], $6::int[], $7::smallint[])
           WITH ORDINALITY AS u(id, attempt, seg, n)
     ORDER BY u.n
);
    END IF;
    FOR k IN SELECT DISTINCT u.seg FROM unnest($5, segs) AS u(id, seg) ORDER BY 1 LOOP
IF k IS NULL THEN
WITH locked AS MATERIALIZED (
    -- Locked in id order (each branch in turn, by segment): a heartbeat locks its rows in the
    -- same (segment, id) order (locked_leases.sql), so an acknowledgement and a heartbeat that
    -- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
    -- after `deadlock_timeout` (1 s), failing one of them.
    SELECT l.id
      FROM {schema}.leases l
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
      JOIN unnest($5::bigint[], $6::int[], segs::smallint[]) AS f(id, attempt, seg)
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
RETURNING id, queue, payload, attempt, max_attempts, seg,
          greatest(extract(epoch FROM now() - run_at), 0)::float8
;
END
$fn$;

-- Privileges: the EXECUTE grants of the functions they replace (an administrator may have
-- taken EXECUTE away from PUBLIC).
DO $grants$
DECLARE
    grant_row record;
    pair text[];
BEGIN
    FOREACH pair SLICE 1 IN ARRAY ARRAY[
        ['{schema}.claim_v9(text, bigint, float8, text, bigint[], integer[], smallint[])',
         '{schema}.claim(text, bigint, float8, text, bigint[], integer[], smallint[])'],
        ['{schema}.claim_any_v9(text[], bigint, float8, text, bigint[], integer[], smallint[])',
         '{schema}.claim_any(text[], bigint, float8, text, bigint[], integer[], smallint[])']]
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', pair[2]);
        FOR grant_row IN
            SELECT a.grantee
              FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
             WHERE p.oid = pair[1]::regprocedure AND a.privilege_type = 'EXECUTE'
               AND a.grantee <> p.proowner
        LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', pair[2],
                           CASE grant_row.grantee WHEN 0 THEN 'PUBLIC'
                                ELSE grant_row.grantee::regrole::text END);
        END LOOP;
    END LOOP;
END
$grants$;

DROP FUNCTION {schema}.claim_v9(text, bigint, float8, text, bigint[], integer[], smallint[]);
DROP FUNCTION {schema}.claim_any_v9(text[], bigint, float8, text, bigint[], integer[], smallint[]);
