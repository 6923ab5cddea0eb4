-- The WHERE clause after job_select.sql: one job of any queue in these tables. ? id
 WHERE id = ?
