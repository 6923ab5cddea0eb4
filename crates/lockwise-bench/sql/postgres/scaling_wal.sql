-- The current WAL position, as bytes since the start of WAL (for WAL bytes per job).
SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint
