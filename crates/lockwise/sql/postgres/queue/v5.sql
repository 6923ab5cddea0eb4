-- Migration 5 (issue 13): the statements of every batch name the lease segment they touch.
-- The claim returns each job's lease segment, and the acknowledgement (in the next claim, or
-- `complete`) and the confirmation name it: `leases_<k>` instead of the ring's parent, which
-- PostgreSQL 15 cannot prune for an UPDATE or DELETE with parameters, so that every such
-- statement locked and opened all sixteen segments, and a truncation of one segment waited
-- for every claim in flight. Jobs whose segment the caller does not know (NULL) go through
-- the parent, as before.
-- The functions' plans are generic (made once per session, and again only when a table they
-- name is truncated). Run as plain prepared statements, PostgreSQL re-plans them at every
-- call, because a plan for the given parameters looks cheaper than a generic one. The
-- claims also turn sequential scans off: a generic plan made while the ready segments are
-- small would otherwise delete the chosen rows with a scan of every segment instead of
-- fetching them by address (claim.sql), and keep that plan when a backlog fills them.
-- The bodies are filled in at migration: the acknowledgement and the confirmation with one
-- branch per lease segment (ack.sql, on the parameters $1-$3 or $5-$7, and
-- confirm_started.sql; the plpgsql variable `k` is the segment), the claims with claim.sql
-- and claim_any.sql. A change to one of those files needs a migration that replaces the
-- functions.

-- Acknowledges finished jobs (moves them to done); returns how many. $1 ids, $2 attempts,
-- $3 their lease segments.
CREATE FUNCTION {schema}.ack(bigint[], integer[], smallint[])
RETURNS bigint
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    k smallint;
    moved bigint;
    total bigint := 0;
BEGIN
    FOR k IN SELECT DISTINCT u.seg FROM unnest($1, $3) AS u(id, seg) LOOP
{ack}
    END LOOP;
    RETURN total;
END
$fn$;

-- Acknowledges the finished jobs $5 (attempts $6, lease segments $7), then claims (claim.sql).
CREATE FUNCTION {schema}.claim(text, bigint, float8, text, bigint[], integer[], smallint[])
RETURNS TABLE (claimed_id bigint, claimed_queue text, claimed_payload jsonb,
               claimed_attempt integer, claimed_max_attempts integer, claimed_seg smallint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
DECLARE
    k smallint;
    moved bigint;
    total bigint := 0;
BEGIN
    FOR k IN SELECT DISTINCT u.seg FROM unnest($5, $7) AS u(id, seg) LOOP
{ack_finished}
    END LOOP;
    RETURN QUERY
{claim};
END
$fn$;

-- The same for a worker of several queues (claim_any.sql).
CREATE FUNCTION {schema}.claim_any(text[], bigint, float8, text, bigint[], integer[], smallint[])
RETURNS TABLE (claimed_id bigint, claimed_queue text, claimed_payload jsonb,
               claimed_attempt integer, claimed_max_attempts integer, claimed_seg smallint)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $fn$
DECLARE
    k smallint;
    moved bigint;
    total bigint := 0;
BEGIN
    FOR k IN SELECT DISTINCT u.seg FROM unnest($5, $7) AS u(id, seg) LOOP
{ack_finished}
    END LOOP;
    RETURN QUERY
{claim_any};
END
$fn$;

-- Confirms the start of claimed jobs (confirm_started.sql); returns their ids. $1 ids,
-- $2 attempts, $3 their lease segments.
CREATE FUNCTION {schema}.confirm_started(bigint[], integer[], smallint[])
RETURNS SETOF bigint
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    k smallint;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    FOR k IN SELECT DISTINCT u.seg FROM unnest($1, $3) AS u(id, seg) LOOP
{confirm}
    END LOOP;
END
$fn$;

-- The lease ring: 32 segments of 100 rows (version 4: 16 of 200). A lease is written twice
-- before it is deleted (the claim, then the confirmation), so a lease segment leaves two dead
-- versions per row where a ready segment leaves one, and the statistics lag a truncation by
-- up to a second (a backend reports its deletions at most once a second): lease segments
-- were the tables nearest the bound of 2,000 dead versions. Now that no statement of a batch
-- names the ring's parent, more segments cost a batch nothing (the rarer statements that go
-- through the parent, a heartbeat or a reap, open 32 instead of 16). Leases in flight stay where
-- they are: segments 0 to 15 keep their numbers.
ALTER TABLE {schema}.leases ALTER COLUMN seg
    SET DEFAULT ((nextval('{schema}.claim_ticket') / 100) % 32)::smallint;
DO $ring$
BEGIN
    FOR i IN 16..31 LOOP
        EXECUTE format('CREATE TABLE %s.leases_%s PARTITION OF %s.leases FOR VALUES IN (%s) '
                       'WITH (fillfactor = 70)', '{schema}', i, '{schema}', i);
    END LOOP;
END
$ring$;

-- truncate_drained (version 4) for rings of any size: a segment is any partition of the
-- ring, instead of a number from 0 to 15.
CREATE OR REPLACE FUNCTION {schema}.truncate_drained(ring text, segs integer[], class integer)
RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $fn$
DECLARE
    seg integer;
    segment text;
    busy boolean;
    empty text[] := '{}';
BEGIN
    IF ring NOT IN ('ready', 'leases') THEN
        RAISE EXCEPTION 'no ring %', ring;
    END IF;
    IF NOT pg_try_advisory_xact_lock(class, hashtext('{schema}.rings')) THEN
        RETURN 0;
    END IF;
    PERFORM set_config('lock_timeout', '20ms', true);
    FOREACH seg IN ARRAY coalesce((SELECT array_agg(DISTINCT s ORDER BY s) FROM unnest(segs) s), '{}') LOOP
        segment := format('%s.%I', '{schema}', ring || '_' || seg);
        IF NOT EXISTS (SELECT 1 FROM pg_inherits
                        WHERE inhparent = format('%s.%I', '{schema}', ring)::regclass
                          AND inhrelid = to_regclass(segment)) THEN
            RAISE EXCEPTION 'no ring segment %_%', ring, seg;
        END IF;
        BEGIN
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', segment);
        EXCEPTION WHEN lock_not_available THEN
            CONTINUE;
        END;
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', segment) INTO STRICT busy;
        IF NOT busy THEN
            empty := empty || segment;
        END IF;
    END LOOP;
    IF cardinality(empty) > 0 THEN
        EXECUTE 'TRUNCATE ' || array_to_string(empty, ', ');
    END IF;
    RETURN cardinality(empty);
END
$fn$;
REVOKE EXECUTE ON FUNCTION {schema}.truncate_drained(text, integer[], integer) FROM PUBLIC;

-- Privileges: an application user granted what the README documents on version 4 keeps
-- working. The statements of a batch now name the lease segments and call these functions,
-- so the new segments get the grants of segment 0, and the new functions those of the claim
-- function they replace (an administrator may have taken EXECUTE away from PUBLIC).
DO $grants$
DECLARE
    grant_row record;
    target text;
    old_acl aclitem[];
BEGIN
    FOR target IN SELECT format('%s.leases_%s', '{schema}', i) FROM generate_series(16, 31) i LOOP
        FOR grant_row IN
            SELECT a.grantee, a.privilege_type
              FROM pg_class c, aclexplode(c.relacl) a
             WHERE c.oid = '{schema}.leases_0'::regclass AND a.grantee <> c.relowner
        LOOP
            EXECUTE format('GRANT %s ON %s TO %s', grant_row.privilege_type, target,
                           CASE grant_row.grantee WHEN 0 THEN 'PUBLIC'
                                ELSE grant_row.grantee::regrole::text END);
        END LOOP;
    END LOOP;
    old_acl := (SELECT proacl FROM pg_proc WHERE oid = to_regprocedure(
        '{schema}.claim(text, bigint, float8, text, bigint[], integer[])'));
    IF old_acl IS NOT NULL THEN
        FOREACH target IN ARRAY ARRAY[
            '{schema}.ack(bigint[], integer[], smallint[])',
            '{schema}.claim(text, bigint, float8, text, bigint[], integer[], smallint[])',
            '{schema}.claim_any(text[], bigint, float8, text, bigint[], integer[], smallint[])',
            '{schema}.confirm_started(bigint[], integer[], smallint[])']
        LOOP
            EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', target);
            FOR grant_row IN
                SELECT a.grantee FROM aclexplode(old_acl) a WHERE a.privilege_type = 'EXECUTE'
            LOOP
                EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', target,
                               CASE grant_row.grantee WHEN 0 THEN 'PUBLIC'
                                    ELSE grant_row.grantee::regrole::text END);
            END LOOP;
        END LOOP;
    END IF;
END
$grants$;

-- Version 4's functions, replaced by the ones above.
DROP FUNCTION IF EXISTS {schema}.claim(text, bigint, float8, text, bigint[], integer[]);
DROP FUNCTION IF EXISTS {schema}.claim_any(text[], bigint, float8, text, bigint[], integer[]);
DROP FUNCTION IF EXISTS {schema}.confirm_started(bigint[], integer[]);
