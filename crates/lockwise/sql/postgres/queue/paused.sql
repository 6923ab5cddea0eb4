-- The paused queues of the schema, by name.
SELECT queue FROM {schema}.paused ORDER BY queue
