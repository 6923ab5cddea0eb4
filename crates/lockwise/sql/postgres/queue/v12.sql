-- Queue schema, version 12: a lease ring of 16,000 leases (32 segments of 500), and the
-- statistics of a queue statement reported when it ends. {schema} is the quoted, validated
-- schema name.
--
-- At 32 handlers (12k jobs/s on two cores) the ring of 3,200 leases (32 × 100) wrapped four
-- times a second: 120 segments a second to truncate, more than the maintenance could, and a
-- segment written again before its truncation kept the dead versions of both fills (4–5k
-- measured). Segments of 500 need a fifth of the truncations, and the ring wraps in 1.3 s at
-- 12k jobs/s, 0.7 s at 22k. A segment's fill leaves 1,000 dead versions (a lease is written
-- twice: the claim, then the confirmation). Leases in flight stay where they are.
ALTER TABLE {schema}.leases ALTER COLUMN seg
    SET DEFAULT ((nextval('{schema}.claim_ticket') / 500) % 32)::smallint;

-- A backend reports its table statistics at most once a second (PostgreSQL 15), so the
-- deletions a claim or an acknowledgement made in a segment just before the segment's
-- truncation reached the statistics after the truncation had reset them: an empty, truncated
-- segment reported up to a second of deletions as dead versions (and autovacuum visited it
-- for nothing). The statements of the worker's path call this function, which asks for the
-- backend's statistics to be reported as soon as the statement ends
-- (pg_stat_force_next_flush, PostgreSQL 15 and later; a no-op before).
DO $flush$
BEGIN
    IF current_setting('server_version_num')::int >= 150000 THEN
        CREATE FUNCTION {schema}.flush_stats() RETURNS void LANGUAGE sql
            AS 'SELECT pg_stat_force_next_flush()';
    ELSE
        CREATE FUNCTION {schema}.flush_stats() RETURNS void LANGUAGE sql AS '';
    END IF;
END
$flush$;

-- Whoever may acknowledge may report.
DO $grants$
DECLARE
    grant_row record;
BEGIN
    FOR grant_row IN
        SELECT a.grantee
          FROM pg_proc p, aclexplode(p.proacl) a
         WHERE p.oid = '{schema}.ack(bigint[], integer[], smallint[])'::regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s.flush_stats() TO %s', '{schema}',
                       CASE grant_row.grantee WHEN 0 THEN 'PUBLIC'
                            ELSE grant_row.grantee::regrole::text END);
    END LOOP;
END
$grants$;
