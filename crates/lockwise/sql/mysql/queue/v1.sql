-- Queue tables for MariaDB 10.6+ / MySQL 8, version 1. {jobs} is the validated table name.
CREATE TABLE IF NOT EXISTS {jobs} (
    id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue           VARCHAR(255) NOT NULL,
    state           VARCHAR(16)  NOT NULL DEFAULT 'available',
    priority        SMALLINT     NOT NULL DEFAULT 0,
    run_at          DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    payload         LONGTEXT     NOT NULL,
    attempt         INT          NOT NULL DEFAULT 0,
    max_attempts    INT          NOT NULL DEFAULT 5,
    idempotency_key VARCHAR(255) NULL,
    lease_until     DATETIME(6)  NULL,
    worker          VARCHAR(255) NULL,
    last_error      TEXT         NULL,
    errors          LONGTEXT     NULL,
    created_at      DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    finished_at     DATETIME(6)  NULL,
    UNIQUE KEY jobs_idempotency (queue, idempotency_key),
    KEY jobs_claim (queue, state, priority, run_at, id),
    KEY jobs_leases (state, lease_until),
    KEY jobs_finished (queue, state, finished_at)
) ENGINE = InnoDB;
