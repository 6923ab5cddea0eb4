-- Dead row versions of a bench's table "jobs" (the statistics of closed sessions included).
-- $1 schema name
SELECT coalesce(n_dead_tup, 0) FROM pg_stat_user_tables
 WHERE schemaname = $1 AND relname = 'jobs'
