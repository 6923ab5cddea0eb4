-- One ring segment's state for the maintenance (the statement is this SELECT for each
-- segment, joined by UNION ALL): its size on disk (0 once truncated and not written since),
-- whether it holds no visible row, and the clock of its ring (the last ticket drawn).
-- {ring} is `ready` or `leases`, {seg} the segment's number (ready: 0 … 15, leases: 0 … 31).
SELECT '{ring}'::text AS ring, {seg}::int4 AS seg,
       pg_relation_size('{schema}.{ring}_{seg}'::regclass) AS bytes,
       (SELECT last_value FROM {schema}.{ring}_clock) AS clock,
       NOT EXISTS (SELECT 1 FROM {schema}.{ring}_{seg}) AS empty
