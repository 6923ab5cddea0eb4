
DROP SCHEMA IF EXISTS ring CASCADE;
CREATE SCHEMA ring;
CREATE SEQUENCE ring.job_id;              -- job ids (continues the v3 identity after migration)
CREATE SEQUENCE ring.claim_ticket;        -- one value per claimed row: the lease ring's clock
CREATE SEQUENCE ring.ready_ticket;        -- one value per ready row: the ready ring's clock
-- The rings' control rows: one per segment. Only the maintenance task updates them (HOT:
-- no indexed column changes), a few times a second at most.
CREATE TABLE ring.segments (
    ring        text     NOT NULL,        -- 'ready', 'leases', 'done'
    seg         smallint NOT NULL,
    state       text     NOT NULL CHECK (state IN ('current', 'sealed', 'free')),
    opened_at   timestamptz,
    first_ticket bigint,
    PRIMARY KEY (ring, seg)
) WITH (fillfactor = 50);

-- Jobs waiting to run, due now. Insert-only, except the claim's DELETE; a sealed segment is
-- TRUNCATEd once drained (which also resets its n_dead_tup).
CREATE TABLE ring.ready (
    seg             smallint    NOT NULL DEFAULT ((nextval('ring.ready_ticket') / 500) % 16),
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
CREATE INDEX ready_claim ON ring.ready (queue, priority, run_at, id);
CREATE INDEX ready_id ON ring.ready (id);

-- Delayed jobs and retries waiting for their backoff: moved to ready when due.
CREATE TABLE ring.scheduled (LIKE ring.ready INCLUDING DEFAULTS);
ALTER TABLE ring.scheduled DROP COLUMN seg;
CREATE INDEX scheduled_due ON ring.scheduled (run_at);
CREATE INDEX scheduled_id ON ring.scheduled (id);

-- Claimed jobs. Confirm and heartbeat are HOT updates (started, lease_until are not indexed);
-- complete/fail/reap DELETE. Sealed segments are TRUNCATEd once empty.
CREATE TABLE ring.leases (
    seg             smallint    NOT NULL DEFAULT ((nextval('ring.claim_ticket') / 400) % 16),
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
CREATE INDEX leases_id ON ring.leases (id);

-- Finished jobs (done, cancelled): insert-only history, a time ring pruned by TRUNCATE.
CREATE TABLE ring.done (
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
CREATE INDEX done_id ON ring.done (id);
CREATE INDEX done_recent ON ring.done (queue, finished_at);

-- Dead letters: kept until retried or purged (rare writes).
CREATE TABLE ring.dead (LIKE ring.done INCLUDING DEFAULTS);
ALTER TABLE ring.dead DROP COLUMN seg, DROP COLUMN state;
ALTER TABLE ring.dead ADD PRIMARY KEY (id);
CREATE INDEX dead_queue ON ring.dead (queue, finished_at);

-- Idempotency keys, across every state: (queue, key) -> job.
CREATE TABLE ring.keys (
    queue      text        NOT NULL,
    key        text        NOT NULL,
    job_id     bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, key)
);

CREATE TABLE ring.ready_0 PARTITION OF ring.ready FOR VALUES IN (0);
INSERT INTO ring.segments VALUES ('ready', 0, 'current', now(), 0);
CREATE TABLE ring.ready_1 PARTITION OF ring.ready FOR VALUES IN (1);
INSERT INTO ring.segments VALUES ('ready', 1, 'free', now(), 0);
CREATE TABLE ring.ready_2 PARTITION OF ring.ready FOR VALUES IN (2);
INSERT INTO ring.segments VALUES ('ready', 2, 'free', now(), 0);
CREATE TABLE ring.ready_3 PARTITION OF ring.ready FOR VALUES IN (3);
INSERT INTO ring.segments VALUES ('ready', 3, 'free', now(), 0);
CREATE TABLE ring.ready_4 PARTITION OF ring.ready FOR VALUES IN (4);
INSERT INTO ring.segments VALUES ('ready', 4, 'free', now(), 0);
CREATE TABLE ring.ready_5 PARTITION OF ring.ready FOR VALUES IN (5);
INSERT INTO ring.segments VALUES ('ready', 5, 'free', now(), 0);
CREATE TABLE ring.ready_6 PARTITION OF ring.ready FOR VALUES IN (6);
INSERT INTO ring.segments VALUES ('ready', 6, 'free', now(), 0);
CREATE TABLE ring.ready_7 PARTITION OF ring.ready FOR VALUES IN (7);
INSERT INTO ring.segments VALUES ('ready', 7, 'free', now(), 0);
CREATE TABLE ring.ready_8 PARTITION OF ring.ready FOR VALUES IN (8);
INSERT INTO ring.segments VALUES ('ready', 8, 'free', now(), 0);
CREATE TABLE ring.ready_9 PARTITION OF ring.ready FOR VALUES IN (9);
INSERT INTO ring.segments VALUES ('ready', 9, 'free', now(), 0);
CREATE TABLE ring.ready_10 PARTITION OF ring.ready FOR VALUES IN (10);
INSERT INTO ring.segments VALUES ('ready', 10, 'free', now(), 0);
CREATE TABLE ring.ready_11 PARTITION OF ring.ready FOR VALUES IN (11);
INSERT INTO ring.segments VALUES ('ready', 11, 'free', now(), 0);
CREATE TABLE ring.ready_12 PARTITION OF ring.ready FOR VALUES IN (12);
INSERT INTO ring.segments VALUES ('ready', 12, 'free', now(), 0);
CREATE TABLE ring.ready_13 PARTITION OF ring.ready FOR VALUES IN (13);
INSERT INTO ring.segments VALUES ('ready', 13, 'free', now(), 0);
CREATE TABLE ring.ready_14 PARTITION OF ring.ready FOR VALUES IN (14);
INSERT INTO ring.segments VALUES ('ready', 14, 'free', now(), 0);
CREATE TABLE ring.ready_15 PARTITION OF ring.ready FOR VALUES IN (15);
INSERT INTO ring.segments VALUES ('ready', 15, 'free', now(), 0);
CREATE TABLE ring.leases_0 PARTITION OF ring.leases FOR VALUES IN (0);
INSERT INTO ring.segments VALUES ('leases', 0, 'current', now(), 0);
CREATE TABLE ring.leases_1 PARTITION OF ring.leases FOR VALUES IN (1);
INSERT INTO ring.segments VALUES ('leases', 1, 'free', now(), 0);
CREATE TABLE ring.leases_2 PARTITION OF ring.leases FOR VALUES IN (2);
INSERT INTO ring.segments VALUES ('leases', 2, 'free', now(), 0);
CREATE TABLE ring.leases_3 PARTITION OF ring.leases FOR VALUES IN (3);
INSERT INTO ring.segments VALUES ('leases', 3, 'free', now(), 0);
CREATE TABLE ring.leases_4 PARTITION OF ring.leases FOR VALUES IN (4);
INSERT INTO ring.segments VALUES ('leases', 4, 'free', now(), 0);
CREATE TABLE ring.leases_5 PARTITION OF ring.leases FOR VALUES IN (5);
INSERT INTO ring.segments VALUES ('leases', 5, 'free', now(), 0);
CREATE TABLE ring.leases_6 PARTITION OF ring.leases FOR VALUES IN (6);
INSERT INTO ring.segments VALUES ('leases', 6, 'free', now(), 0);
CREATE TABLE ring.leases_7 PARTITION OF ring.leases FOR VALUES IN (7);
INSERT INTO ring.segments VALUES ('leases', 7, 'free', now(), 0);
CREATE TABLE ring.leases_8 PARTITION OF ring.leases FOR VALUES IN (8);
INSERT INTO ring.segments VALUES ('leases', 8, 'free', now(), 0);
CREATE TABLE ring.leases_9 PARTITION OF ring.leases FOR VALUES IN (9);
INSERT INTO ring.segments VALUES ('leases', 9, 'free', now(), 0);
CREATE TABLE ring.leases_10 PARTITION OF ring.leases FOR VALUES IN (10);
INSERT INTO ring.segments VALUES ('leases', 10, 'free', now(), 0);
CREATE TABLE ring.leases_11 PARTITION OF ring.leases FOR VALUES IN (11);
INSERT INTO ring.segments VALUES ('leases', 11, 'free', now(), 0);
CREATE TABLE ring.leases_12 PARTITION OF ring.leases FOR VALUES IN (12);
INSERT INTO ring.segments VALUES ('leases', 12, 'free', now(), 0);
CREATE TABLE ring.leases_13 PARTITION OF ring.leases FOR VALUES IN (13);
INSERT INTO ring.segments VALUES ('leases', 13, 'free', now(), 0);
CREATE TABLE ring.leases_14 PARTITION OF ring.leases FOR VALUES IN (14);
INSERT INTO ring.segments VALUES ('leases', 14, 'free', now(), 0);
CREATE TABLE ring.leases_15 PARTITION OF ring.leases FOR VALUES IN (15);
INSERT INTO ring.segments VALUES ('leases', 15, 'free', now(), 0);
CREATE TABLE ring.done_0 PARTITION OF ring.done FOR VALUES IN (0);
INSERT INTO ring.segments VALUES ('done', 0, 'current', now(), 0);
CREATE TABLE ring.done_1 PARTITION OF ring.done FOR VALUES IN (1);
INSERT INTO ring.segments VALUES ('done', 1, 'free', now(), 0);
CREATE TABLE ring.done_2 PARTITION OF ring.done FOR VALUES IN (2);
INSERT INTO ring.segments VALUES ('done', 2, 'free', now(), 0);
CREATE TABLE ring.done_3 PARTITION OF ring.done FOR VALUES IN (3);
INSERT INTO ring.segments VALUES ('done', 3, 'free', now(), 0);
CREATE TABLE ring.done_4 PARTITION OF ring.done FOR VALUES IN (4);
INSERT INTO ring.segments VALUES ('done', 4, 'free', now(), 0);
CREATE TABLE ring.done_5 PARTITION OF ring.done FOR VALUES IN (5);
INSERT INTO ring.segments VALUES ('done', 5, 'free', now(), 0);
CREATE TABLE ring.done_6 PARTITION OF ring.done FOR VALUES IN (6);
INSERT INTO ring.segments VALUES ('done', 6, 'free', now(), 0);
CREATE TABLE ring.done_7 PARTITION OF ring.done FOR VALUES IN (7);
INSERT INTO ring.segments VALUES ('done', 7, 'free', now(), 0);

CREATE FUNCTION ring.cur(r text) RETURNS smallint LANGUAGE sql STABLE AS
$$ SELECT seg FROM ring.segments WHERE ring = r AND state = 'current' $$;

CREATE FUNCTION ring.notify_ready() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('ring_jobs', q) FROM (SELECT DISTINCT queue AS q FROM new_rows) n;
    RETURN NULL;
END $fn$;
CREATE TRIGGER ready_notify AFTER INSERT ON ring.ready REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ring.notify_ready();

-- Maintenance step: rotate a ring whose current segment has taken `every` tickets (ready:
-- job ids, leases: claim tickets) or is older than `max_age`; truncate sealed segments that
-- are empty. Each TRUNCATE waits at most lock_timeout for the segment's lock.
CREATE FUNCTION ring.rotate(r text, ticket bigint, every bigint, max_age interval)
RETURNS int LANGUAGE plpgsql AS $fn$
DECLARE
    c record; f smallint; s record; n int := 0;
BEGIN
    SELECT * INTO c FROM ring.segments WHERE ring = r AND state = 'current' FOR UPDATE;
    IF ticket - c.first_ticket >= every OR c.opened_at < now() - max_age THEN
        SELECT seg INTO f FROM ring.segments WHERE ring = r AND state = 'free'
         ORDER BY (seg - c.seg + 1000) % 1000 LIMIT 1;
        IF f IS NOT NULL THEN
            UPDATE ring.segments SET state = 'sealed' WHERE ring = r AND seg = c.seg;
            UPDATE ring.segments SET state = 'current', opened_at = now(), first_ticket = ticket
             WHERE ring = r AND seg = f;
        END IF;
    END IF;
    RETURN n;
END $fn$;

CREATE FUNCTION ring.truncate_drained(r text) RETURNS int LANGUAGE plpgsql AS $fn$
DECLARE s record; n int := 0; nonempty boolean; cur int; size int; nsegs int;
BEGIN
    PERFORM set_config('lock_timeout', '20ms', true);
    IF r = 'ready' THEN
        SELECT (last_value / 500) % 16 INTO cur FROM ring.ready_ticket; nsegs := 16;
    ELSE
        SELECT (last_value / 400) % 16 INTO cur FROM ring.claim_ticket; nsegs := 16;
    END IF;
    -- every segment but the current one (and the next, about to be), oldest first, that holds pages
    FOR s IN SELECT (cur + k) % nsegs AS seg FROM generate_series(1, nsegs - 2) k
              WHERE pg_relation_size(format('ring.%I', r || '_' || (cur + k) % nsegs)::regclass) > 0 LOOP
        BEGIN
            EXECUTE format('LOCK TABLE ring.%I IN ACCESS EXCLUSIVE MODE', r || '_' || s.seg);
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM ring.%I)', r || '_' || s.seg) INTO nonempty;
            IF NOT nonempty THEN
                EXECUTE format('TRUNCATE ring.%I', r || '_' || s.seg);
                n := n + 1;
            END IF;
        EXCEPTION WHEN lock_not_available THEN NULL;
        END;
    END LOOP;
    RETURN n;
END $fn$;


-- One segment per transaction: the ACCESS EXCLUSIVE lock is held for one TRUNCATE only.
CREATE PROCEDURE ring.truncate_drained_each(r text) LANGUAGE plpgsql AS $fn$
DECLARE k int; nonempty boolean; cur int; nsegs int;
BEGIN
    IF r = 'ready' THEN
        SELECT (last_value / 500) % 16 INTO cur FROM ring.ready_ticket; nsegs := 16;
    ELSE
        SELECT (last_value / 400) % 16 INTO cur FROM ring.claim_ticket; nsegs := 16;
    END IF;
    FOR k IN SELECT (cur + d) % nsegs FROM generate_series(1, nsegs - 2) d LOOP
        CONTINUE WHEN pg_relation_size(format('ring.%I', r || '_' || k)::regclass) = 0;
        PERFORM set_config('lock_timeout', '20ms', true);
        BEGIN
            EXECUTE format('LOCK TABLE ring.%I IN ACCESS EXCLUSIVE MODE', r || '_' || k);
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM ring.%I)', r || '_' || k) INTO nonempty;
            IF NOT nonempty THEN
                EXECUTE format('TRUNCATE ring.%I', r || '_' || k);
            END IF;
        EXCEPTION WHEN lock_not_available THEN NULL;
        END;
        COMMIT;
    END LOOP;
END $fn$;

CREATE FUNCTION ring.truncate_expired(retention interval) RETURNS int LANGUAGE plpgsql AS $fn$
DECLARE k int; n int := 0; cur int; newest timestamptz;
BEGIN
    PERFORM set_config('lock_timeout', '20ms', true);
    cur := (extract(epoch FROM now())::bigint / 10) % 8;
    FOR k IN SELECT (cur + d) % 8 FROM generate_series(1, 8 - 1) d LOOP
        CONTINUE WHEN pg_relation_size(format('ring.done_%s', k)::regclass) = 0;
        BEGIN
            EXECUTE format('LOCK TABLE ring.done_%s IN ACCESS EXCLUSIVE MODE', k);
            EXECUTE format('SELECT max(finished_at) FROM ring.done_%s', k) INTO newest;
            IF newest IS NULL OR newest < now() - retention THEN
                EXECUTE format('TRUNCATE ring.done_%s', k);
                n := n + 1;
            END IF;
        EXCEPTION WHEN lock_not_available THEN NULL;
        END;
    END LOOP;
    RETURN n;
END $fn$;

