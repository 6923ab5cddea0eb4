-- Confirms claimed jobs through the schema's function `confirm_started` (as v10.sql last
-- replaced it: a branch per lease segment, with generic plans). $1 ids, $2 attempts, $3 their
-- lease segments (NULL where unknown)
-- flush_stats (v12.sql): the statement's table statistics are reported when it ends.
SELECT {schema}.confirm_started($1, $2, $3) FROM {schema}.flush_stats()
