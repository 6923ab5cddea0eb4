-- Running jobs: one row per worker slot, updated in place. Its only index is the primary key,
-- which no statement changes, so every claim, confirm, heartbeat and ack is a HOT update,
-- and page pruning (which lowers n_dead_tup for heap-only tuples) keeps it small.
CREATE TABLE slot.slots (
    worker          text        NOT NULL,
    slot            integer     NOT NULL,
    id              bigint,
    queue           text,
    priority        smallint,
    run_at          timestamptz,
    payload         jsonb,
    attempt         integer,
    max_attempts    integer,
    idempotency_key text,
    created_at      timestamptz,
    last_error      text,
    errors          jsonb,
    started         boolean,
    lease_until     timestamptz,
    claimed_at      timestamptz,
    seen_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (worker, slot)
) WITH (fillfactor = 20);
INSERT INTO slot.slots (worker, slot) SELECT w::text, s FROM generate_series(0, 7) w, generate_series(0, 19) s;
