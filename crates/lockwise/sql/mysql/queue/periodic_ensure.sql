-- Creates schedule ? (of queue ?) without a period if it is new. A scheduler racing to create
-- the same one waits here for the first one's transaction.
INSERT IGNORE INTO {periodic} (name, queue, updated_at) VALUES (?, ?, NOW(6))
