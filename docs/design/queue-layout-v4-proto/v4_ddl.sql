DROP SCHEMA IF EXISTS v4 CASCADE; CREATE SCHEMA v4;
CREATE SEQUENCE v4.job_id;        -- setval'ed from v3's max(id) by the migration
CREATE SEQUENCE v4.ready_ticket;  -- the ready ring's clock: one value per ready row
CREATE SEQUENCE v4.claim_ticket;  -- the lease ring's clock: one value per claim

CREATE TABLE v4.ring_config (
    ring     text PRIMARY KEY,          -- 'ready', 'leases', 'done'
    segments integer NOT NULL,
    size     bigint  NOT NULL           -- rows per segment (ready, leases) or seconds (done)
);

-- Jobs due now. Only INSERT (enqueue, promote, retry now, reap, hand back) and the claim's DELETE.
CREATE TABLE v4.ready (
    seg             smallint    NOT NULL DEFAULT ((nextval('v4.ready_ticket') / 500) % 16),
    id              bigint      NOT NULL,
    queue           text        NOT NULL,
    priority        smallint    NOT NULL DEFAULT 0,
    run_at          timestamptz NOT NULL DEFAULT now(),
    payload         jsonb       NOT NULL,
    attempt         integer     NOT NULL DEFAULT 0,     -- attempts made so far
    max_attempts    integer     NOT NULL DEFAULT 5,
    idempotency_key text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    errors          jsonb       NOT NULL DEFAULT '[]'
) PARTITION BY LIST (seg);
CREATE INDEX ready_claim ON v4.ready (queue, priority, run_at, id);
CREATE INDEX ready_id    ON v4.ready (id);
-- CREATE TABLE v4.ready_0 PARTITION OF v4.ready FOR VALUES IN (0); … ready_15

-- Delayed jobs and retries waiting for their backoff. Promoted into ready when due.
CREATE TABLE v4.scheduled (
    id bigint PRIMARY KEY, queue text NOT NULL, priority smallint NOT NULL, run_at timestamptz NOT NULL,
    payload jsonb NOT NULL, attempt integer NOT NULL, max_attempts integer NOT NULL,
    idempotency_key text, created_at timestamptz NOT NULL, last_error text, errors jsonb NOT NULL
);
CREATE INDEX scheduled_due ON v4.scheduled (run_at);
CREATE INDEX scheduled_queue ON v4.scheduled (queue, run_at);

-- Claimed jobs. started/lease_until/worker are not indexed: confirm and heartbeat are HOT.
CREATE TABLE v4.leases (
    seg             smallint    NOT NULL DEFAULT ((nextval('v4.claim_ticket') / 400) % 16),
    id              bigint      NOT NULL,
    queue           text        NOT NULL,
    priority        smallint    NOT NULL,
    run_at          timestamptz NOT NULL,
    payload         jsonb       NOT NULL,
    attempt         integer     NOT NULL,               -- this execution's fencing token
    max_attempts    integer     NOT NULL,
    idempotency_key text,
    created_at      timestamptz NOT NULL,
    last_error      text,
    errors          jsonb       NOT NULL,
    started         boolean     NOT NULL DEFAULT false,
    lease_until     timestamptz NOT NULL,
    worker          text,
    claimed_at      timestamptz NOT NULL DEFAULT now()
) PARTITION BY LIST (seg);
CREATE INDEX leases_id ON v4.leases (id);
-- leases_0 … leases_15

-- Finished history: insert-only time ring; retention = TRUNCATE.
CREATE TABLE v4.done (
    seg             smallint    NOT NULL DEFAULT ((extract(epoch FROM now())::bigint / 14400) % 8),
    id              bigint      NOT NULL,
    queue           text        NOT NULL,
    state           text        NOT NULL CHECK (state IN ('done', 'cancelled')),
    priority        smallint    NOT NULL,
    attempt         integer     NOT NULL,
    max_attempts    integer     NOT NULL,
    idempotency_key text,
    payload         jsonb       NOT NULL,
    worker          text,
    last_error      text,
    errors          jsonb       NOT NULL,
    created_at      timestamptz NOT NULL,
    run_at          timestamptz NOT NULL,
    finished_at     timestamptz NOT NULL DEFAULT now()
) PARTITION BY LIST (seg);
CREATE INDEX done_id     ON v4.done (id);
CREATE INDEX done_recent ON v4.done (queue, state, finished_at);
-- done_0 … done_7

-- Per sealed done slot, its counts (so stats never scans history). Written once per slot.
CREATE TABLE v4.done_counts (
    seg smallint NOT NULL, queue text NOT NULL, state text NOT NULL, n bigint NOT NULL,
    sealed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (seg, queue, state)
);

-- Dead letters: kept until retried or purged.
CREATE TABLE v4.dead (
    id bigint PRIMARY KEY, queue text NOT NULL, priority smallint NOT NULL, attempt integer NOT NULL,
    max_attempts integer NOT NULL, idempotency_key text, payload jsonb NOT NULL, worker text,
    last_error text, errors jsonb NOT NULL, created_at timestamptz NOT NULL,
    run_at timestamptz NOT NULL, finished_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dead_queue ON v4.dead (queue, finished_at, id);

-- Idempotency keys across every state: (queue, key) → the job that holds it.
CREATE TABLE v4.keys (
    queue      text        NOT NULL,
    key        text        NOT NULL,
    job_id     bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, key)
);

-- Wake-ups: one notification per queue and statement (bulk enqueue → one NOTIFY).
CREATE FUNCTION v4.notify_ready() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('v4_jobs', q) FROM (SELECT DISTINCT queue AS q FROM new_rows) n;
    RETURN NULL;
END $fn$;
CREATE TRIGGER ready_notify AFTER INSERT ON v4.ready REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION v4.notify_ready();
CREATE TABLE v4.ready_0 PARTITION OF v4.ready FOR VALUES IN (0);
CREATE TABLE v4.ready_1 PARTITION OF v4.ready FOR VALUES IN (1);
CREATE TABLE v4.ready_2 PARTITION OF v4.ready FOR VALUES IN (2);
CREATE TABLE v4.ready_3 PARTITION OF v4.ready FOR VALUES IN (3);
CREATE TABLE v4.ready_4 PARTITION OF v4.ready FOR VALUES IN (4);
CREATE TABLE v4.ready_5 PARTITION OF v4.ready FOR VALUES IN (5);
CREATE TABLE v4.ready_6 PARTITION OF v4.ready FOR VALUES IN (6);
CREATE TABLE v4.ready_7 PARTITION OF v4.ready FOR VALUES IN (7);
CREATE TABLE v4.ready_8 PARTITION OF v4.ready FOR VALUES IN (8);
CREATE TABLE v4.ready_9 PARTITION OF v4.ready FOR VALUES IN (9);
CREATE TABLE v4.ready_10 PARTITION OF v4.ready FOR VALUES IN (10);
CREATE TABLE v4.ready_11 PARTITION OF v4.ready FOR VALUES IN (11);
CREATE TABLE v4.ready_12 PARTITION OF v4.ready FOR VALUES IN (12);
CREATE TABLE v4.ready_13 PARTITION OF v4.ready FOR VALUES IN (13);
CREATE TABLE v4.ready_14 PARTITION OF v4.ready FOR VALUES IN (14);
CREATE TABLE v4.ready_15 PARTITION OF v4.ready FOR VALUES IN (15);
CREATE TABLE v4.leases_0 PARTITION OF v4.leases FOR VALUES IN (0);
CREATE TABLE v4.leases_1 PARTITION OF v4.leases FOR VALUES IN (1);
CREATE TABLE v4.leases_2 PARTITION OF v4.leases FOR VALUES IN (2);
CREATE TABLE v4.leases_3 PARTITION OF v4.leases FOR VALUES IN (3);
CREATE TABLE v4.leases_4 PARTITION OF v4.leases FOR VALUES IN (4);
CREATE TABLE v4.leases_5 PARTITION OF v4.leases FOR VALUES IN (5);
CREATE TABLE v4.leases_6 PARTITION OF v4.leases FOR VALUES IN (6);
CREATE TABLE v4.leases_7 PARTITION OF v4.leases FOR VALUES IN (7);
CREATE TABLE v4.leases_8 PARTITION OF v4.leases FOR VALUES IN (8);
CREATE TABLE v4.leases_9 PARTITION OF v4.leases FOR VALUES IN (9);
CREATE TABLE v4.leases_10 PARTITION OF v4.leases FOR VALUES IN (10);
CREATE TABLE v4.leases_11 PARTITION OF v4.leases FOR VALUES IN (11);
CREATE TABLE v4.leases_12 PARTITION OF v4.leases FOR VALUES IN (12);
CREATE TABLE v4.leases_13 PARTITION OF v4.leases FOR VALUES IN (13);
CREATE TABLE v4.leases_14 PARTITION OF v4.leases FOR VALUES IN (14);
CREATE TABLE v4.leases_15 PARTITION OF v4.leases FOR VALUES IN (15);
CREATE TABLE v4.done_0 PARTITION OF v4.done FOR VALUES IN (0);
CREATE TABLE v4.done_1 PARTITION OF v4.done FOR VALUES IN (1);
CREATE TABLE v4.done_2 PARTITION OF v4.done FOR VALUES IN (2);
CREATE TABLE v4.done_3 PARTITION OF v4.done FOR VALUES IN (3);
CREATE TABLE v4.done_4 PARTITION OF v4.done FOR VALUES IN (4);
CREATE TABLE v4.done_5 PARTITION OF v4.done FOR VALUES IN (5);
CREATE TABLE v4.done_6 PARTITION OF v4.done FOR VALUES IN (6);
CREATE TABLE v4.done_7 PARTITION OF v4.done FOR VALUES IN (7);
