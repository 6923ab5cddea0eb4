-- The fencing-token counters of the MariaDB/MySQL lock backend: one row per lock key (the
-- key's bytes), advanced right after each grant. Idempotent. {engine} is filled in by the
-- backend: on MariaDB `Aria TRANSACTIONAL = 0` (no redo-log flush per grant; see grant.sql for
-- why the tokens need none), on MySQL, or with durable tokens asked for, `InnoDB`.
CREATE TABLE IF NOT EXISTS lockwise_fence (
    lock_key VARBINARY(640) NOT NULL PRIMARY KEY,
    token    BIGINT UNSIGNED NOT NULL
) ENGINE = {engine}
