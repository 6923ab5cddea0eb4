-- Queue tables, version 4: every text column in utf8mb4 with a binary NO PAD collation
-- ({binary}: utf8mb4_nopad_bin on MariaDB, utf8mb4_0900_bin on MySQL 8), so that queue names,
-- idempotency keys and worker ids compare byte for byte, as on PostgreSQL. Under the server's
-- default collations `Abc`, `abc`, `Abc ` and `abc` with an accent were one key: a job
-- enqueued with the second was dropped as a duplicate of the first, and a worker of one queue
-- ran the jobs of the others. Converting keeps every row: equal bytes stay equal, so no unique
-- key can be violated, and latin1 or utf8mb3 text converts to utf8mb4 without loss. It copies
-- the table (writers wait for it). Applied when the queue column's collation is not
-- {binary}. {jobs} is the validated table name.
ALTER TABLE {jobs} CONVERT TO CHARACTER SET utf8mb4 COLLATE {binary}
