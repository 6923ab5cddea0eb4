-- The paused queues, by name.
SELECT queue FROM {paused} ORDER BY queue
