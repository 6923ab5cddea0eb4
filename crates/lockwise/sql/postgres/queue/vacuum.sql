-- Clears the jobs table's dead row versions and refreshes its statistics. No parameters;
-- never inside a transaction.
VACUUM (ANALYZE) {schema}.jobs
