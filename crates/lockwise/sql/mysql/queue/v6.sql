-- Version 6: paused queues and periodic schedules. Text compares byte for byte ({binary}, as
-- version 4). {paused} and {periodic} are the validated table names.
--
-- A paused queue keeps its jobs and takes new ones, but workers claim none of it: each worker
-- reads this table once per poll interval and leaves the paused queues out of its claims.
CREATE TABLE IF NOT EXISTS {paused} (
    queue     VARCHAR(255) NOT NULL PRIMARY KEY,
    paused_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB CHARACTER SET utf8mb4 COLLATE {binary};

-- One row per periodic schedule: the newest period (a Unix second) a job was enqueued for, or
-- recorded as passed. A scheduler locks the row, enqueues the periods due after it and moves it
-- forward in one transaction, so each period is enqueued once whatever the number of
-- schedulers. Created last: its existence means version 6 is whole.
CREATE TABLE IF NOT EXISTS {periodic} (
    name        VARCHAR(255) NOT NULL PRIMARY KEY,
    queue       VARCHAR(255) NOT NULL,
    last_period BIGINT       NULL,
    updated_at  DATETIME(6)  NOT NULL
) ENGINE = InnoDB CHARACTER SET utf8mb4 COLLATE {binary};
