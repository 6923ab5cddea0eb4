-- Creates schedule $1 (of queue $2) without a period if it is new. A scheduler racing to
-- create the same one waits here for the first one's transaction.
INSERT INTO {schema}.periodic (name, queue) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING
