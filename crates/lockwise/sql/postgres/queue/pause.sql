-- Pauses queue $1; `changed` is 1 when it was running.
WITH p AS (
    INSERT INTO {schema}.paused (queue) VALUES ($1) ON CONFLICT (queue) DO NOTHING RETURNING 1
)
SELECT count(*) AS changed FROM p
