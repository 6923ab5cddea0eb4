-- The dead row versions of each table of a bench's queue store (the statistics of closed
-- sessions included), but the tables $2: the other side's, in a schema both sides share.
-- $1 schema name, $2 tables left out (text[])
SELECT relname::text, n_dead_tup::bigint
  FROM pg_stat_user_tables
 WHERE schemaname = $1 AND relname <> ALL ($2::text[])
