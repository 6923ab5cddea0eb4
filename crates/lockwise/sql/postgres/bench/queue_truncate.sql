-- Empties the bench's queue table (and resets its dead-tuple count).
TRUNCATE {schema}.jobs
