-- The most dead row versions of any table of a bench's queue store (the statistics of
-- closed sessions included): the figure a layout that never rots keeps low in every table.
-- The tables $2 are left out: the other side's table in a schema both sides share, whose
-- statistics arrive up to a second late and would be counted in this side's figure.
-- $1 schema name, $2 tables left out (text[])
SELECT coalesce(max(n_dead_tup), 0)::bigint
  FROM pg_stat_user_tables
 WHERE schemaname = $1 AND relname <> ALL ($2::text[])
