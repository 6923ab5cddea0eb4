-- The most dead row versions of any table of a bench's queue store (the statistics of
-- closed sessions included): the figure a layout that never rots keeps low in every table.
-- $1 schema name
SELECT coalesce(max(n_dead_tup), 0)::bigint FROM pg_stat_user_tables WHERE schemaname = $1
