-- The jobs table's dead row versions according to the statistics (no row before the first
-- statistics report). No parameters.
SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = '{schema}.jobs'::regclass
