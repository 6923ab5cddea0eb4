
DROP SCHEMA IF EXISTS mv CASCADE;
CREATE SCHEMA mv;
CREATE SEQUENCE mv.job_id;              -- job ids (continues the v3 identity after migration)
CREATE SEQUENCE mv.claim_ticket;        -- one value per claimed row: the lease ring's clock
CREATE SEQUENCE mv.ready_ticket;        -- one value per ready row: the ready ring's clock
-- The rings' control rows: one per segment. Only the maintenance task updates them (HOT:
-- no indexed column changes), a few times a second at most.
CREATE TABLE mv.segments (
    ring        text     NOT NULL,        -- 'ready', 'leases', 'done'
    seg         smallint NOT NULL,
    state       text     NOT NULL CHECK (state IN ('current', 'sealed', 'free')),
    opened_at   timestamptz,
    first_ticket bigint,
    PRIMARY KEY (ring, seg)
) WITH (fillfactor = 50);

-- Jobs waiting to run, due now. Insert-only, except the claim's DELETE; a sealed segment is
-- TRUNCATEd once drained (which also resets its n_dead_tup).
CREATE TABLE mv.ready (
    seg             smallint    NOT NULL DEFAULT ((nextval('mv.ready_ticket') / 500) % 1),
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
CREATE INDEX ready_claim ON mv.ready (queue, priority, run_at, id);
CREATE INDEX ready_id ON mv.ready (id);

-- Delayed jobs and retries waiting for their backoff: moved to ready when due.
CREATE TABLE mv.scheduled (LIKE mv.ready INCLUDING DEFAULTS);
ALTER TABLE mv.scheduled DROP COLUMN seg;
CREATE INDEX scheduled_due ON mv.scheduled (run_at);
CREATE INDEX scheduled_id ON mv.scheduled (id);

-- Claimed jobs. Confirm and heartbeat are HOT updates (started, lease_until are not indexed);
-- complete/fail/reap DELETE. Sealed segments are TRUNCATEd once empty.
CREATE TABLE mv.leases (
    seg             smallint    NOT NULL DEFAULT ((nextval('mv.claim_ticket') / 400) % 1),
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
CREATE INDEX leases_id ON mv.leases (id);

-- Finished jobs (done, cancelled): insert-only history, a time ring pruned by TRUNCATE.
CREATE TABLE mv.done (
    seg             smallint    NOT NULL DEFAULT ((extract(epoch FROM now())::bigint / 10) % 1),
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
CREATE INDEX done_id ON mv.done (id);
CREATE INDEX done_recent ON mv.done (queue, finished_at);

-- Dead letters: kept until retried or purged (rare writes).
CREATE TABLE mv.dead (LIKE mv.done INCLUDING DEFAULTS);
ALTER TABLE mv.dead DROP COLUMN seg, DROP COLUMN state;
ALTER TABLE mv.dead ADD PRIMARY KEY (id);
CREATE INDEX dead_queue ON mv.dead (queue, finished_at);

-- Idempotency keys, across every state: (queue, key) -> job.
CREATE TABLE mv.keys (
    queue      text        NOT NULL,
    key        text        NOT NULL,
    job_id     bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, key)
);

CREATE TABLE mv.ready_0 PARTITION OF mv.ready FOR VALUES IN (0);
INSERT INTO mv.segments VALUES ('ready', 0, 'current', now(), 0);
CREATE TABLE mv.leases_0 PARTITION OF mv.leases FOR VALUES IN (0);
INSERT INTO mv.segments VALUES ('leases', 0, 'current', now(), 0);
CREATE TABLE mv.done_0 PARTITION OF mv.done FOR VALUES IN (0);
INSERT INTO mv.segments VALUES ('done', 0, 'current', now(), 0);

CREATE FUNCTION mv.cur(r text) RETURNS smallint LANGUAGE sql STABLE AS
$$ SELECT seg FROM mv.segments WHERE ring = r AND state = 'current' $$;

CREATE FUNCTION mv.notify_ready() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('mv_jobs', q) FROM (SELECT DISTINCT queue AS q FROM new_rows) n;
    RETURN NULL;
END $fn$;
CREATE TRIGGER ready_notify AFTER INSERT ON mv.ready REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION mv.notify_ready();

-- Maintenance step: rotate a ring whose current segment has taken `every` tickets (ready:
-- job ids, leases: claim tickets) or is older than `max_age`; truncate sealed segments that
-- are empty. Each TRUNCATE waits at most lock_timeout for the segment's lock.
CREATE FUNCTION mv.rotate(r text, ticket bigint, every bigint, max_age interval)
RETURNS int LANGUAGE plpgsql AS $fn$
DECLARE
    c record; f smallint; s record; n int := 0;
BEGIN
    SELECT * INTO c FROM mv.segments WHERE ring = r AND state = 'current' FOR UPDATE;
    IF ticket - c.first_ticket >= every OR c.opened_at < now() - max_age THEN
        SELECT seg INTO f FROM mv.segments WHERE ring = r AND state = 'free'
         ORDER BY (seg - c.seg + 1000) % 1000 LIMIT 1;
        IF f IS NOT NULL THEN
            UPDATE mv.segments SET state = 'sealed' WHERE ring = r AND seg = c.seg;
            UPDATE mv.segments SET state = 'current', opened_at = now(), first_ticket = ticket
             WHERE ring = r AND seg = f;
        END IF;
    END IF;
    RETURN n;
END $fn$;

CREATE FUNCTION mv.truncate_drained(r text) RETURNS int LANGUAGE plpgsql AS $fn$
DECLARE s record; n int := 0; nonempty boolean; cur int; size int; nsegs int;
BEGIN
    PERFORM set_config('lock_timeout', '20ms', true);
    IF r = 'ready' THEN
        SELECT (last_value / 500) % 1 INTO cur FROM mv.ready_ticket; nsegs := 1;
    ELSE
        SELECT (last_value / 400) % 1 INTO cur FROM mv.claim_ticket; nsegs := 1;
    END IF;
    -- every segment but the current one (and the next, about to be), oldest first, that holds pages
    FOR s IN SELECT (cur + k) % nsegs AS seg FROM generate_series(1, nsegs - 2) k
              WHERE pg_relation_size(format('mv.%I', r || '_' || (cur + k) % nsegs)::regclass) > 0 LOOP
        BEGIN
            EXECUTE format('LOCK TABLE mv.%I IN ACCESS EXCLUSIVE MODE', r || '_' || s.seg);
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM mv.%I)', r || '_' || s.seg) INTO nonempty;
            IF NOT nonempty THEN
                EXECUTE format('TRUNCATE mv.%I', r || '_' || s.seg);
                n := n + 1;
            END IF;
        EXCEPTION WHEN lock_not_available THEN NULL;
        END;
    END LOOP;
    RETURN n;
END $fn$;


CREATE FUNCTION mv.truncate_expired(retention interval) RETURNS int LANGUAGE plpgsql AS $fn$
DECLARE k int; n int := 0; cur int; newest timestamptz;
BEGIN
    PERFORM set_config('lock_timeout', '20ms', true);
    cur := (extract(epoch FROM now())::bigint / 10) % 1;
    FOR k IN SELECT (cur + d) % 1 FROM generate_series(1, 1 - 1) d LOOP
        CONTINUE WHEN pg_relation_size(format('mv.done_%s', k)::regclass) = 0;
        BEGIN
            EXECUTE format('LOCK TABLE mv.done_%s IN ACCESS EXCLUSIVE MODE', k);
            EXECUTE format('SELECT max(finished_at) FROM mv.done_%s', k) INTO newest;
            IF newest IS NULL OR newest < now() - retention THEN
                EXECUTE format('TRUNCATE mv.done_%s', k);
                n := n + 1;
            END IF;
        EXCEPTION WHEN lock_not_available THEN NULL;
        END;
    END LOOP;
    RETURN n;
END $fn$;

