-- Queue schema, version 9: an acknowledgement that names some of its jobs without a lease
-- segment locks them in heartbeat order too. {schema} is the quoted, validated schema name.
--
-- Version 7's functions took the jobs of no known segment (a process that did not claim them,
-- or one past its memory of segments) last, through the ring's parent: a job of segment 3
-- acknowledged with a hint and one of segment 1 without were locked 3 then 1, where a
-- heartbeat of both locks 1 then 3, a deadlock that PostgreSQL breaks only after
-- `deadlock_timeout` (1 s), failing one of them. Now the functions first look up the segment
-- of each job named without one (lease_segments.sql; a batch whose hints are all of the ring
-- skips it), then lock segment by segment in ascending order as before, with every job in
-- its own segment's branch. A job whose lease is gone goes to the NULL branch, which finds
-- nothing of it.
--
-- The functions keep their signatures (CREATE OR REPLACE), so their grants stand and a
-- process of version 7 or 8 calls the new bodies with the same arguments. Their text is
-- version 7's otherwise.

-- Acknowledges finished jobs (moves them to done); returns how many. $1 ids, $2 attempts,
-- $3 their lease segments (hints).
CREATE OR REPLACE FUNCTION {schema}.ack(bigint[], integer[], smallint[])
RETURNS bigint
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    k smallint;
    moved bigint;
    total bigint := 0;
    segs smallint[] := $3;
BEGIN
    IF EXISTS (SELECT FROM unnest(segs) s WHERE s IS NULL OR s NOT BETWEEN 0 AND {last}) THEN
        segs := {segments};
    END IF;
    FOR k IN SELECT DISTINCT u.seg FROM unnest($1, segs) AS u(id, seg) ORDER BY 1 LOOP
{ack_of_segs}
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
    segs smallint[] := $7;
BEGIN
    IF EXISTS (SELECT FROM unnest(segs) s WHERE s IS NULL OR s NOT BETWEEN 0 AND {last}) THEN
        segs := {finished_segments};
    END IF;
    FOR k IN SELECT DISTINCT u.seg FROM unnest($5, segs) AS u(id, seg) ORDER BY 1 LOOP
{ack_finished_of_segs}
    END LOOP;
    RETURN QUERY
{claim};
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
    segs smallint[] := $7;
BEGIN
    IF EXISTS (SELECT FROM unnest(segs) s WHERE s IS NULL OR s NOT BETWEEN 0 AND {last}) THEN
        segs := {finished_segments};
    END IF;
    FOR k IN SELECT DISTINCT u.seg FROM unnest($5, segs) AS u(id, seg) ORDER BY 1 LOOP
{ack_finished_of_segs}
    END LOOP;
    RETURN QUERY
{claim_any};
END
$fn$;
