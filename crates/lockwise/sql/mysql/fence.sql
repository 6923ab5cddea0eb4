-- The fencing-token counters of the MariaDB/MySQL lock backend: one row per lock key (the
-- key's bytes), advanced right after each grant. Idempotent; no parameters.
CREATE TABLE IF NOT EXISTS lockwise_fence (
    lock_key VARBINARY(640) NOT NULL PRIMARY KEY,
    token    BIGINT UNSIGNED NOT NULL
) ENGINE = InnoDB
