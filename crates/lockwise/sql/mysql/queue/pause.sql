-- Pauses queue ?; one row affected when it was running.
INSERT IGNORE INTO {paused} (queue, paused_at) VALUES (?, NOW(6))
