-- Issues the next fencing token of a lock key, right after its GET_LOCK was granted: the
-- counter row is created at 1 or advanced by one, and LAST_INSERT_ID() returns the new value
-- to this session (read from the statement's result).
--
-- ?1  the lock key's bytes
INSERT INTO lockwise_fence (lock_key, token) VALUES (?, LAST_INSERT_ID(1))
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)
