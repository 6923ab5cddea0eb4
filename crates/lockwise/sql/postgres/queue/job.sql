-- The WHERE clause after job_select.sql: one job of any queue in the schema. $1 id
 WHERE id = $1
 LIMIT 1
