-- The sustained bench's floor on MariaDB/MySQL: what a hand-written SKIP LOCKED queue keeps,
-- one row per job updated in place. {jobs} is the validated table name.
CREATE TABLE {jobs} (
    id          bigint      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue       varchar(255) NOT NULL,
    state       varchar(16) NOT NULL DEFAULT 'available',
    priority    smallint    NOT NULL DEFAULT 0,
    run_at      datetime(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    payload     json        NOT NULL,
    finished_at datetime(6),
    KEY floor_claim (queue, state, priority, run_at, id)
) ENGINE = InnoDB
