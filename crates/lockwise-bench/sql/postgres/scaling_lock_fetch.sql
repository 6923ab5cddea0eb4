-- The lock-guarded queue, as the lesson writes it: under the distributed lock, the oldest
-- pending job ... {schema} is the quoted, validated schema name.
SELECT id FROM {schema}.jobs WHERE state = 'pending' ORDER BY created_at LIMIT 1
