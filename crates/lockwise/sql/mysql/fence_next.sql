-- Issues the next fencing token of a lock key, right after its GET_LOCK was granted, and
-- returns it to this session through LAST_INSERT_ID() (read from the statement's result).
--
-- The token is one above the last one issued for the key, and never below the server's clock
-- in Unix milliseconds x 1024 (the session's time zone is UTC, so no daylight-saving step can
-- move it back). So when the counter loses its last updates in a crash (a server configured
-- with innodb_flush_log_at_trx_commit = 0 or 2, or a failover to a replica that missed them),
-- the next token is still above every token issued before, provided the server's clock has
-- not gone back since and no key was granted more than 1024 times in one millisecond.
--
-- ?1  the lock key's bytes
INSERT INTO lockwise_fence (lock_key, token)
VALUES (?, LAST_INSERT_ID(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS UNSIGNED) * 1024))
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(
    GREATEST(token + 1, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS UNSIGNED) * 1024))
