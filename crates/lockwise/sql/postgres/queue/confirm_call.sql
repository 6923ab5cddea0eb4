-- Confirms claimed jobs through the schema's function (v4.sql: confirm_started.sql with a
-- generic plan). $1 ids, $2 attempts
SELECT {schema}.confirm_started($1, $2)
