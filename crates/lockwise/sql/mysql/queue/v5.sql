-- Version 5: the live workers (`lockwise queue workers`, Queue::workers). Each running
-- Worker keeps a row, refreshed every third of its lease and removed when it stops; a row
-- past expires_at is a worker that died (rows an hour past it are deleted by the next
-- refresh of any worker). Text compares byte for byte ({binary}, as version 4). {workers} is
-- the validated table name.
CREATE TABLE IF NOT EXISTS {workers} (
    id          VARCHAR(255) NOT NULL PRIMARY KEY,
    host        VARCHAR(255) NOT NULL,
    pid         INT          NOT NULL,
    queues      TEXT         NOT NULL,
    concurrency INT          NOT NULL,
    running     INT          NOT NULL,
    started_at  DATETIME(6)  NOT NULL,
    seen_at     DATETIME(6)  NOT NULL,
    expires_at  DATETIME(6)  NOT NULL
) ENGINE = InnoDB CHARACTER SET utf8mb4 COLLATE {binary}
