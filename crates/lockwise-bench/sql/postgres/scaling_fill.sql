-- Empties the table and fills it with $1 pending jobs, in creation order.
-- {schema} is the quoted, validated schema name.
WITH emptied AS (DELETE FROM {schema}.jobs)
INSERT INTO {schema}.jobs (created_at)
SELECT clock_timestamp() FROM generate_series(1, $1)
