-- Fills the bench's (emptied) queue table with $2 no-op jobs of queue $1, ready now.
-- {schema} is the quoted, validated schema name of the bench's own queue store.
INSERT INTO {schema}.jobs (queue, payload)
SELECT $1, '{}'::jsonb FROM generate_series(1, $2)
