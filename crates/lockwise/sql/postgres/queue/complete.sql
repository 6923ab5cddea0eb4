-- Marks jobs done: moves them from leases to done, compare-and-set on (id, attempt), so a
-- worker whose job was rescued cannot complete it late (v5.sql's function {schema}.ack: each
-- lease segment by name). $1 ids, $2 attempts, $3 their lease segments (NULL where unknown).
-- Returns how many.
-- flush_stats (v12.sql): the statement's table statistics are reported when it ends.
SELECT {schema}.ack($1, $2, $3) FROM {schema}.flush_stats()
