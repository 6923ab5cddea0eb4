
DROP SCHEMA IF EXISTS slot CASCADE;
CREATE SCHEMA slot;
CREATE SEQUENCE slot.job_id;              -- job ids (continues the v3 identity after migration)
CREATE SEQUENCE slot.claim_ticket;        -- one value per claimed row: the lease ring's clock
CREATE SEQUENCE slot.ready_ticket;        -- one value per ready row: the ready ring's clock
-- The rings' control rows: one per segment. Only the maintenance task updates them (HOT:
-- no indexed column changes), a few times a second at most.
CREATE TABLE slot.segments (
    ring        text     NOT NULL,        -- 'ready', 'leases', 'done'
    seg         smallint NOT NULL,
    state       text     NOT NULL CHECK (state IN ('current', 'sealed', 'free')),
    opened_at   timestamptz,
    first_ticket bigint,
    PRIMARY KEY (ring, seg)
) WITH (fillfactor = 50);

-- Jobs waiting to run, due now. Insert-only, except the claim's DELETE; a sealed segment is
-- TRUNCATEd once drained (which also resets its n_dead_tup).
CREATE TABLE slot.ready (
    seg             smallint    NOT NULL DEFAULT ((nextval('slot.ready_ticket') / 500) % 16),
    id              bigint      NOT NULL,
    queue           text        NOT NULL,
    priority        smallint    NOT NULL DEFAULT 0,
    run_at          timestamptz NOT NULL DEFAULT now(),
    payload         jsonb       NOT NULL,
    attempt         integer     NOT NULL DEFAULT 0,
    max_attempts    integer     NOT NULL DEFAULT 5,
    idempotency_key text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    errors          jsonb       NOT NULL DEFAULT '[]'
) PARTITION BY LIST (seg);
CREATE INDEX ready_claim ON slot.ready (queue, priority, run_at, id);
CREATE INDEX ready_id ON slot.ready (id);

-- Delayed jobs and retries waiting for their backoff: moved to ready when due.
CREATE TABLE slot.scheduled (LIKE slot.ready INCLUDING DEFAULTS);
ALTER TABLE slot.scheduled DROP COLUMN seg;
CREATE INDEX scheduled_due ON slot.scheduled (run_at);
CREATE INDEX scheduled_id ON slot.scheduled (id);

-- Claimed jobs. Confirm and heartbeat are HOT updates (started, lease_until are not indexed);
-- complete/fail/reap DELETE. Sealed segments are TRUNCATEd once empty.
CREATE TABLE slot.leases (
    seg             smallint    NOT NULL DEFAULT ((nextval('slot.claim_ticket') / 400) % 1),
    id              bigint      NOT NULL,
    queue           text        NOT NULL,
    priority        smallint    NOT NULL,
    run_at          timestamptz NOT NULL,
    payload         jsonb       NOT NULL,
    attempt         integer     NOT NULL,
    max_attempts    integer     NOT NULL,
    idempotency_key text,
    created_at      timestamptz NOT NULL,
    last_error      text,
    errors          jsonb       NOT NULL,
    started         boolean     NOT NULL DEFAULT false,
    lease_until     timestamptz NOT NULL,
    worker          text,
    claimed_at      timestamptz NOT NULL DEFAULT now()
) PARTITION BY LIST (seg) ;
CREATE INDEX leases_id ON slot.leases (id);

-- Finished jobs (done, cancelled): insert-only history, a time ring pruned by TRUNCATE.
CREATE TABLE slot.done (
    seg             smallint    NOT NULL DEFAULT ((extract(epoch FROM now())::bigint / 10) % 8),
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
CREATE INDEX done_id ON slot.done (id);
CREATE INDEX done_recent ON slot.done (queue, finished_at);

-- Dead letters: kept until retried or purged (rare writes).
CREATE TABLE slot.dead (LIKE slot.done INCLUDING DEFAULTS);
ALTER TABLE slot.dead DROP COLUMN seg, DROP COLUMN state;
ALTER TABLE slot.dead ADD PRIMARY KEY (id);
CREATE INDEX dead_queue ON slot.dead (queue, finished_at);

-- Idempotency keys, across every state: (queue, key) -> job.
CREATE TABLE slot.keys (
    queue      text        NOT NULL,
    key        text        NOT NULL,
    job_id     bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, key)
);

CREATE TABLE slot.ready_0 PARTITION OF slot.ready FOR VALUES IN (0);
INSERT INTO slot.segments VALUES ('ready', 0, 'current', now(), 0);
CREATE TABLE slot.ready_1 PARTITION OF slot.ready FOR VALUES IN (1);
INSERT INTO slot.segments VALUES ('ready', 1, 'free', now(), 0);
CREATE TABLE slot.ready_2 PARTITION OF slot.ready FOR VALUES IN (2);
INSERT INTO slot.segments VALUES ('ready', 2, 'free', now(), 0);
CREATE TABLE slot.ready_3 PARTITION OF slot.ready FOR VALUES IN (3);
INSERT INTO slot.segments VALUES ('ready', 3, 'free', now(), 0);
CREATE TABLE slot.ready_4 PARTITION OF slot.ready FOR VALUES IN (4);
INSERT INTO slot.segments VALUES ('ready', 4, 'free', now(), 0);
CREATE TABLE slot.ready_5 PARTITION OF slot.ready FOR VALUES IN (5);
INSERT INTO slot.segments VALUES ('ready', 5, 'free', now(), 0);
CREATE TABLE slot.ready_6 PARTITION OF slot.ready FOR VALUES IN (6);
INSERT INTO slot.segments VALUES ('ready', 6, 'free', now(), 0);
CREATE TABLE slot.ready_7 PARTITION OF slot.ready FOR VALUES IN (7);
INSERT INTO slot.segments VALUES ('ready', 7, 'free', now(), 0);
CREATE TABLE slot.ready_8 PARTITION OF slot.ready FOR VALUES IN (8);
INSERT INTO slot.segments VALUES ('ready', 8, 'free', now(), 0);
CREATE TABLE slot.ready_9 PARTITION OF slot.ready FOR VALUES IN (9);
INSERT INTO slot.segments VALUES ('ready', 9, 'free', now(), 0);
CREATE TABLE slot.ready_10 PARTITION OF slot.ready FOR VALUES IN (10);
INSERT INTO slot.segments VALUES ('ready', 10, 'free', now(), 0);
CREATE TABLE slot.ready_11 PARTITION OF slot.ready FOR VALUES IN (11);
INSERT INTO slot.segments VALUES ('ready', 11, 'free', now(), 0);
CREATE TABLE slot.ready_12 PARTITION OF slot.ready FOR VALUES IN (12);
INSERT INTO slot.segments VALUES ('ready', 12, 'free', now(), 0);
CREATE TABLE slot.ready_13 PARTITION OF slot.ready FOR VALUES IN (13);
INSERT INTO slot.segments VALUES ('ready', 13, 'free', now(), 0);
CREATE TABLE slot.ready_14 PARTITION OF slot.ready FOR VALUES IN (14);
INSERT INTO slot.segments VALUES ('ready', 14, 'free', now(), 0);
CREATE TABLE slot.ready_15 PARTITION OF slot.ready FOR VALUES IN (15);
INSERT INTO slot.segments VALUES ('ready', 15, 'free', now(), 0);
CREATE TABLE slot.leases_0 PARTITION OF slot.leases FOR VALUES IN (0);
INSERT INTO slot.segments VALUES ('leases', 0, 'current', now(), 0);
CREATE TABLE slot.done_0 PARTITION OF slot.done FOR VALUES IN (0);
INSERT INTO slot.segments VALUES ('done', 0, 'current', now(), 0);
CREATE TABLE slot.done_1 PARTITION OF slot.done FOR VALUES IN (1);
INSERT INTO slot.segments VALUES ('done', 1, 'free', now(), 0);
CREATE TABLE slot.done_2 PARTITION OF slot.done FOR VALUES IN (2);
INSERT INTO slot.segments VALUES ('done', 2, 'free', now(), 0);
CREATE TABLE slot.done_3 PARTITION OF slot.done FOR VALUES IN (3);
INSERT INTO slot.segments VALUES ('done', 3, 'free', now(), 0);
CREATE TABLE slot.done_4 PARTITION OF slot.done FOR VALUES IN (4);
INSERT INTO slot.segments VALUES ('done', 4, 'free', now(), 0);
CREATE TABLE slot.done_5 PARTITION OF slot.done FOR VALUES IN (5);
INSERT INTO slot.segments VALUES ('done', 5, 'free', now(), 0);
CREATE TABLE slot.done_6 PARTITION OF slot.done FOR VALUES IN (6);
INSERT INTO slot.segments VALUES ('done', 6, 'free', now(), 0);
CREATE TABLE slot.done_7 PARTITION OF slot.done FOR VALUES IN (7);
INSERT INTO slot.segments VALUES ('done', 7, 'free', now(), 0);

CREATE FUNCTION slot.cur(r text) RETURNS smallint LANGUAGE sql STABLE AS
$$ SELECT seg FROM slot.segments WHERE ring = r AND state = 'current' $$;

CREATE FUNCTION slot.notify_ready() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('slot_jobs', q) FROM (SELECT DISTINCT queue AS q FROM new_rows) n;
    RETURN NULL;
END $fn$;
CREATE TRIGGER ready_notify AFTER INSERT ON slot.ready REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION slot.notify_ready();

-- Maintenance step: rotate a ring whose current segment has taken `every` tickets (ready:
-- job ids, leases: claim tickets) or is older than `max_age`; truncate sealed segments that
-- are empty. Each TRUNCATE waits at most lock_timeout for the segment's lock.
CREATE FUNCTION slot.rotate(r text, ticket bigint, every bigint, max_age interval)
RETURNS int LANGUAGE plpgsql AS $fn$
DECLARE
    c record; f smallint; s record; n int := 0;
BEGIN
    SELECT * INTO c FROM slot.segments WHERE ring = r AND state = 'current' FOR UPDATE;
    IF ticket - c.first_ticket >= every OR c.opened_at < now() - max_age THEN
        SELECT seg INTO f FROM slot.segments WHERE ring = r AND state = 'free'
         ORDER BY (seg - c.seg + 1000) % 1000 LIMIT 1;
        IF f IS NOT NULL THEN
            UPDATE slot.segments SET state = 'sealed' WHERE ring = r AND seg = c.seg;
            UPDATE slot.segments SET state = 'current', opened_at = now(), first_ticket = ticket
             WHERE ring = r AND seg = f;
        END IF;
    END IF;
    RETURN n;
END $fn$;

CREATE FUNCTION slot.truncate_drained(r text) RETURNS int LANGUAGE plpgsql AS $fn$
DECLARE s record; n int := 0; nonempty boolean; cur int; size int; nsegs int;
BEGIN
    PERFORM set_config('lock_timeout', '20ms', true);
    IF r = 'ready' THEN
        SELECT (last_value / 500) % 16 INTO cur FROM slot.ready_ticket; nsegs := 16;
    ELSE
        SELECT (last_value / 400) % 1 INTO cur FROM slot.claim_ticket; nsegs := 1;
    END IF;
    -- every segment but the current one (and the next, about to be), oldest first, that holds pages
    FOR s IN SELECT (cur + k) % nsegs AS seg FROM generate_series(1, nsegs - 2) k
              WHERE pg_relation_size(format('slot.%I', r || '_' || (cur + k) % nsegs)::regclass) > 0 LOOP
        BEGIN
            EXECUTE format('LOCK TABLE slot.%I IN ACCESS EXCLUSIVE MODE', r || '_' || s.seg);
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM slot.%I)', r || '_' || s.seg) INTO nonempty;
            IF NOT nonempty THEN
                EXECUTE format('TRUNCATE slot.%I', r || '_' || s.seg);
                n := n + 1;
            END IF;
        EXCEPTION WHEN lock_not_available THEN NULL;
        END;
    END LOOP;
    RETURN n;
END $fn$;


-- One segment per transaction: the ACCESS EXCLUSIVE lock is held for one TRUNCATE only.
CREATE PROCEDURE slot.truncate_drained_each(r text) LANGUAGE plpgsql AS $fn$
DECLARE k int; nonempty boolean; cur int; nsegs int;
BEGIN
    IF r = 'ready' THEN
        SELECT (last_value / 500) % 16 INTO cur FROM slot.ready_ticket; nsegs := 16;
    ELSE
        SELECT (last_value / 400) % 1 INTO cur FROM slot.claim_ticket; nsegs := 1;
    END IF;
    FOR k IN SELECT (cur + d) % nsegs FROM generate_series(1, nsegs - 2) d LOOP
        CONTINUE WHEN pg_relation_size(format('slot.%I', r || '_' || k)::regclass) = 0;
        PERFORM set_config('lock_timeout', '20ms', true);
        BEGIN
            EXECUTE format('LOCK TABLE slot.%I IN ACCESS EXCLUSIVE MODE', r || '_' || k);
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM slot.%I)', r || '_' || k) INTO nonempty;
            IF NOT nonempty THEN
                EXECUTE format('TRUNCATE slot.%I', r || '_' || k);
            END IF;
        EXCEPTION WHEN lock_not_available THEN NULL;
        END;
        COMMIT;
    END LOOP;
END $fn$;

CREATE FUNCTION slot.truncate_expired(retention interval) RETURNS int LANGUAGE plpgsql AS $fn$
DECLARE k int; n int := 0; cur int; newest timestamptz;
BEGIN
    PERFORM set_config('lock_timeout', '20ms', true);
    cur := (extract(epoch FROM now())::bigint / 10) % 8;
    FOR k IN SELECT (cur + d) % 8 FROM generate_series(1, 8 - 1) d LOOP
        CONTINUE WHEN pg_relation_size(format('slot.done_%s', k)::regclass) = 0;
        BEGIN
            EXECUTE format('LOCK TABLE slot.done_%s IN ACCESS EXCLUSIVE MODE', k);
            EXECUTE format('SELECT max(finished_at) FROM slot.done_%s', k) INTO newest;
            IF newest IS NULL OR newest < now() - retention THEN
                EXECUTE format('TRUNCATE slot.done_%s', k);
                n := n + 1;
            END IF;
        EXCEPTION WHEN lock_not_available THEN NULL;
        END;
    END LOOP;
    RETURN n;
END $fn$;

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
