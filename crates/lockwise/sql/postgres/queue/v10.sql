-- Queue schema, version 10: a confirmation locks its jobs in heartbeat order too.
-- {schema} is the quoted, validated schema name.
--
-- Version 5's confirm_started took the segments of its jobs in whatever order DISTINCT gave
-- them, a job without a known segment through the ring's parent, and the rows of a segment in
-- the order the plan met them. A heartbeat locks them in (segment, id) order
-- (locked_leases.sql), so a program that heartbeat the jobs of a claim while it confirmed
-- them could deadlock with itself, which PostgreSQL breaks only after `deadlock_timeout`
-- (1 s), failing one side. Now the function looks up the segments it was not told, as v9.sql's
-- acknowledgements do (lease_segments.sql), goes through the segments in ascending order, and
-- in each locks the rows in id order before it updates them (confirm_locked.sql).
--
-- The function keeps its signature (CREATE OR REPLACE), so its grants stand and a process of
-- an earlier version calls the new body with the same arguments.

-- Confirms the start of claimed jobs; returns their ids. $1 ids, $2 attempts, $3 their lease
-- segments (hints).
CREATE OR REPLACE FUNCTION {schema}.confirm_started(bigint[], integer[], smallint[])
RETURNS SETOF bigint
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    k smallint;
    segs smallint[] := $3;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    IF EXISTS (SELECT FROM unnest(segs) s WHERE s IS NULL OR s NOT BETWEEN 0 AND 31) THEN
        segs := ARRAY(
    SELECT CASE WHEN u.seg BETWEEN 0 AND 31 THEN u.seg
                ELSE (SELECT l.seg
                        FROM {schema}.leases l
                       WHERE l.id = u.id AND l.attempt = u.attempt)
           END
      FROM unnest($1::bigint[], $2::int[], $3::smallint[])
           WITH ORDINALITY AS u(id, attempt, seg, n)
     ORDER BY u.n
);
    END IF;
    FOR k IN SELECT DISTINCT u.seg FROM unnest($1, segs) AS u(id, seg) ORDER BY 1 LOOP
IF k IS NULL THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg IS NULL
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 0 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_0 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 0
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_0 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 1 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_1 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 1
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_1 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 2 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_2 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 2
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_2 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 3 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_3 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 3
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_3 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 4 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_4 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 4
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_4 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 5 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_5 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 5
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_5 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 6 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_6 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 6
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_6 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 7 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_7 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 7
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_7 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 8 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_8 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 8
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_8 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 9 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_9 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 9
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_9 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 10 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_10 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 10
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_10 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 11 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_11 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 11
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_11 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 12 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_12 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 12
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_12 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 13 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_13 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 13
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_13 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 14 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_14 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 14
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_14 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 15 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_15 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 15
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_15 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 16 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_16 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 16
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_16 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 17 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_17 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 17
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_17 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 18 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_18 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 18
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_18 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 19 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_19 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 19
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_19 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 20 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_20 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 20
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_20 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 21 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_21 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 21
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_21 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 22 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_22 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 22
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_22 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 23 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_23 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 23
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_23 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 24 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_24 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 24
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_24 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 25 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_25 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 25
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_25 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 26 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_26 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 26
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_26 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 27 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_27 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 27
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_27 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 28 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_28 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 28
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_28 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 29 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_29 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 29
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_29 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 30 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_30 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 30
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_30 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSIF k = 31 THEN
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases_31 l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = 31
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases_31 l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

ELSE
RETURN QUERY
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases l
      JOIN unnest($1::bigint[], $2::int[], segs::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND f.seg = k
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id;

END IF;
    END LOOP;
END
$fn$;
