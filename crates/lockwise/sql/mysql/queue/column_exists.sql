-- 1 when the jobs table of the current database has the column, else 0 (the migrations check
-- what is applied). ? table name, ? column name
SELECT CAST(COUNT(*) AS SIGNED) FROM information_schema.columns
 WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?
