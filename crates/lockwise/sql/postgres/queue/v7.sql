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
{ack}
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
{ack_finished}
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
BEGIN
    FOR k IN SELECT DISTINCT u.seg FROM unnest($5, $7) AS u(id, seg) ORDER BY 1 LOOP
{ack_finished}
    END LOOP;
    RETURN QUERY
{claim_any};
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
{confirm}
    END LOOP;
END
$fn$;

