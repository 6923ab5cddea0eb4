-- What the bench reports about the server: its version and what makes a commit durable.
SELECT CAST(VERSION() AS CHAR) AS version,
       CAST(@@innodb_flush_log_at_trx_commit AS CHAR) AS innodb_flush_log_at_trx_commit,
       CAST(@@sync_binlog AS CHAR) AS sync_binlog
