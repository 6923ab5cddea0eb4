-- Makes this session publish its table statistics at the end of this statement, so that the
-- next read of pg_stat_user_tables includes them (PostgreSQL 15+).
SELECT pg_stat_force_next_flush()
