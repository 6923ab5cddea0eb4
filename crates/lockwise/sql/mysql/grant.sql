-- Grants a lock and issues its fencing token in one round trip (several statements in one
-- text-protocol request, run in order on the holder's session). The placeholders are filled
-- in by the backend with values that are safe to inline: {lease} and {idle} are numbers of
-- seconds, {name} is the hex lock name, {key} the lock key's bytes in hex.
--
-- 1. The session's wait_timeout becomes the lease first, so that a holder frozen right after
--    the grant still loses its session, and its lock, when the lease runs out.
-- 2. GET_LOCK without waiting.
-- 3. Only if granted: the key's next fencing token, returned to this session through
--    LAST_INSERT_ID(). The token is one above the last one issued for the key, and never
--    below the server's clock in Unix milliseconds x 1024 (the session's time zone is UTC,
--    so no daylight-saving step can move it back). So when the counter loses its last updates
--    in a crash (innodb_flush_log_at_trx_commit = 0 or 2, or a failover to a replica that
--    missed them), the next token is still above every token issued before, provided the
--    server's clock has not gone back since and no key was granted more than 1024 times in
--    one millisecond (GET_LOCK grants one key at most once per round trip). Autocommit: no
--    rollback can reissue a token.
--    So the counter need not be durable, only kept while the server runs: on MariaDB its
--    table is Aria with TRANSACTIONAL = 0, which writes without a redo-log flush (a grant
--    costs ~30 us more than GET_LOCK alone instead of ~215 us with InnoDB's flush, measured
--    in docs/performance.md). A crash may lose its last updates, or the rows of a table the
--    server repairs on reopening: the clock floor above covers both, as it covers InnoDB
--    with innodb_flush_log_at_trx_commit = 2. What the durable counter adds is a token
--    order that survives a crash *and* a server clock set back across it; MysqlBuilder::
--    durable_tokens keeps InnoDB for that.
-- 4. A refused session gets its idle lifetime back (it is kept for later attempts).
-- 5. One row: whether granted (1), the session's id, and the token (meaningful if granted).
SET SESSION wait_timeout = {lease};
SET @lw_got = GET_LOCK('{name}', 0);
INSERT INTO lockwise_fence (lock_key, token)
SELECT X'{key}', LAST_INSERT_ID(CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS UNSIGNED) * 1024)
  FROM DUAL WHERE @lw_got = 1
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(
    GREATEST(token + 1, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS UNSIGNED) * 1024));
SET SESSION wait_timeout = IF(@lw_got = 1, {lease}, {idle});
SELECT CAST(@lw_got AS SIGNED), CAST(CONNECTION_ID() AS SIGNED),
       CAST(LAST_INSERT_ID() AS UNSIGNED)
