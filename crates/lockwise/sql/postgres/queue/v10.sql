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
    IF EXISTS (SELECT FROM unnest(segs) s WHERE s IS NULL OR s NOT BETWEEN 0 AND {last}) THEN
        segs := {segments};
    END IF;
    FOR k IN SELECT DISTINCT u.seg FROM unnest($1, segs) AS u(id, seg) ORDER BY 1 LOOP
{confirm_of_segs}
    END LOOP;
END
$fn$;
