-- The locks held now whose key starts with a prefix (`lockwise locks`): the keys that have a
-- fencing counter, each with the session that holds its GET_LOCK name (IS_USED_LOCK, a
-- lookup that touches no table), that session's client, and the sessions waiting for the
-- name (the waiters' probes, which name the lock in their statement's text).
--
-- ?  the prefix's length in bytes
-- ?  the prefix's bytes
SELECT f.lock_key,
       CAST(f.token AS UNSIGNED) AS token,
       CAST(f.session AS SIGNED) AS session,
       CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) AS now_ms,
       p.HOST AS client,
       (SELECT COUNT(*) FROM information_schema.PROCESSLIST w
         WHERE w.STATE = 'User lock' AND w.INFO LIKE CONCAT('%', f.name, '%')) AS waiters
  FROM (SELECT lock_key, token, SHA2(lock_key, 256) AS name,
               IS_USED_LOCK(SHA2(lock_key, 256)) AS session
          FROM lockwise_fence
         WHERE LEFT(lock_key, ?) = ?) f
  LEFT JOIN information_schema.PROCESSLIST p ON p.ID = f.session
 WHERE f.session IS NOT NULL
 ORDER BY f.lock_key
