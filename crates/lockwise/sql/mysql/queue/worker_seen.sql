-- A running worker's row, created or refreshed. ? id, ? host, ? pid, ? queues (a JSON array),
-- ? concurrency, ? jobs running, ? lease (microseconds)
INSERT INTO {workers} (id, host, pid, queues, concurrency, running, started_at, seen_at,
                       expires_at)
VALUES (?, ?, ?, ?, ?, ?, NOW(6), NOW(6), NOW(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE running = VALUES(running), seen_at = NOW(6),
                        expires_at = VALUES(expires_at)
