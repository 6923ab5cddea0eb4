-- Confirms claimed jobs through the schema's function (v5.sql: confirm_started.sql for each
-- lease segment, with generic plans). $1 ids, $2 attempts, $3 their lease segments (NULL
-- where unknown)
SELECT {schema}.confirm_started($1, $2, $3)
