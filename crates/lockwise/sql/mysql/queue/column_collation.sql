-- The collation of a column of the jobs table in the current database (NULL when the column
-- is missing or not text). ? table name, ? column name
SELECT collation_name FROM information_schema.columns
 WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?
