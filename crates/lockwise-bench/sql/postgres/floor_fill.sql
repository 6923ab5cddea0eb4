-- Fills the floor's (emptied) table with $2 no-op jobs of queue $1, ready now.
-- {schema} is the quoted, validated schema name of the bench's own store.
INSERT INTO {schema}.floor_jobs (queue, payload)
SELECT $1, '{}'::jsonb FROM generate_series(1, $2)
