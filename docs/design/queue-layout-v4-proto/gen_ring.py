import sys
# usage: gen_ring.py SCHEMA NREADY NLEASE NDONE
S, NR, NL, ND = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
SR, SL, PD = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
out = []
p = out.append
p(f"""
DROP SCHEMA IF EXISTS {S} CASCADE;
CREATE SCHEMA {S};
CREATE SEQUENCE {S}.job_id;              -- job ids (continues the v3 identity after migration)
CREATE SEQUENCE {S}.claim_ticket;        -- one value per claimed row: the lease ring's clock
CREATE SEQUENCE {S}.ready_ticket;        -- one value per ready row: the ready ring's clock
-- The rings' control rows: one per segment. Only the maintenance task updates them (HOT:
-- no indexed column changes), a few times a second at most.
CREATE TABLE {S}.segments (
    ring        text     NOT NULL,        -- 'ready', 'leases', 'done'
    seg         smallint NOT NULL,
    state       text     NOT NULL CHECK (state IN ('current', 'sealed', 'free')),
    opened_at   timestamptz,
    first_ticket bigint,
    PRIMARY KEY (ring, seg)
) WITH (fillfactor = 50);

-- Jobs waiting to run, due now. Insert-only, except the claim's DELETE; a sealed segment is
-- TRUNCATEd once drained (which also resets its n_dead_tup).
CREATE TABLE {S}.ready (
    seg             smallint    NOT NULL DEFAULT ((nextval('{S}.ready_ticket') / {SR}) % {NR}),
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
CREATE INDEX ready_claim ON {S}.ready (queue, priority, run_at, id);
CREATE INDEX ready_id ON {S}.ready (id);

-- Delayed jobs and retries waiting for their backoff: moved to ready when due.
CREATE TABLE {S}.scheduled (LIKE {S}.ready INCLUDING DEFAULTS);
ALTER TABLE {S}.scheduled DROP COLUMN seg;
CREATE INDEX scheduled_due ON {S}.scheduled (run_at);
CREATE INDEX scheduled_id ON {S}.scheduled (id);

-- Claimed jobs. Confirm and heartbeat are HOT updates (started, lease_until are not indexed);
-- complete/fail/reap DELETE. Sealed segments are TRUNCATEd once empty.
CREATE TABLE {S}.leases (
    seg             smallint    NOT NULL DEFAULT ((nextval('{S}.claim_ticket') / {SL}) % {NL}),
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
CREATE INDEX leases_id ON {S}.leases (id);

-- Finished jobs (done, cancelled): insert-only history, a time ring pruned by TRUNCATE.
CREATE TABLE {S}.done (
    seg             smallint    NOT NULL DEFAULT ((extract(epoch FROM now())::bigint / {PD}) % {ND}),
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
CREATE INDEX done_id ON {S}.done (id);
CREATE INDEX done_recent ON {S}.done (queue, finished_at);

-- Dead letters: kept until retried or purged (rare writes).
CREATE TABLE {S}.dead (LIKE {S}.done INCLUDING DEFAULTS);
ALTER TABLE {S}.dead DROP COLUMN seg, DROP COLUMN state;
ALTER TABLE {S}.dead ADD PRIMARY KEY (id);
CREATE INDEX dead_queue ON {S}.dead (queue, finished_at);

-- Idempotency keys, across every state: (queue, key) -> job.
CREATE TABLE {S}.keys (
    queue      text        NOT NULL,
    key        text        NOT NULL,
    job_id     bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, key)
);
""")
for ring, n in (("ready", NR), ("leases", NL), ("done", ND)):
    for i in range(n):
        p(f"CREATE TABLE {S}.{ring}_{i} PARTITION OF {S}.{ring} FOR VALUES IN ({i});")
        p(f"INSERT INTO {S}.segments VALUES ('{ring}', {i}, '{'current' if i == 0 else 'free'}', now(), 0);")
p(f"""
CREATE FUNCTION {S}.cur(r text) RETURNS smallint LANGUAGE sql STABLE AS
$$ SELECT seg FROM {S}.segments WHERE ring = r AND state = 'current' $$;

CREATE FUNCTION {S}.notify_ready() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('{S}_jobs', q) FROM (SELECT DISTINCT queue AS q FROM new_rows) n;
    RETURN NULL;
END $fn$;
CREATE TRIGGER ready_notify AFTER INSERT ON {S}.ready REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {S}.notify_ready();

-- Maintenance step: rotate a ring whose current segment has taken `every` tickets (ready:
-- job ids, leases: claim tickets) or is older than `max_age`; truncate sealed segments that
-- are empty. Each TRUNCATE waits at most lock_timeout for the segment's lock.
CREATE FUNCTION {S}.rotate(r text, ticket bigint, every bigint, max_age interval)
RETURNS int LANGUAGE plpgsql AS $fn$
DECLARE
    c record; f smallint; s record; n int := 0;
BEGIN
    SELECT * INTO c FROM {S}.segments WHERE ring = r AND state = 'current' FOR UPDATE;
    IF ticket - c.first_ticket >= every OR c.opened_at < now() - max_age THEN
        SELECT seg INTO f FROM {S}.segments WHERE ring = r AND state = 'free'
         ORDER BY (seg - c.seg + 1000) % 1000 LIMIT 1;
        IF f IS NOT NULL THEN
            UPDATE {S}.segments SET state = 'sealed' WHERE ring = r AND seg = c.seg;
            UPDATE {S}.segments SET state = 'current', opened_at = now(), first_ticket = ticket
             WHERE ring = r AND seg = f;
        END IF;
    END IF;
    RETURN n;
END $fn$;

CREATE FUNCTION {S}.truncate_drained(r text) RETURNS int LANGUAGE plpgsql AS $fn$
DECLARE s record; n int := 0; nonempty boolean; cur int; size int; nsegs int;
BEGIN
    PERFORM set_config('lock_timeout', '20ms', true);
    IF r = 'ready' THEN
        SELECT (last_value / {SR}) % {NR} INTO cur FROM {S}.ready_ticket; nsegs := {NR};
    ELSE
        SELECT (last_value / {SL}) % {NL} INTO cur FROM {S}.claim_ticket; nsegs := {NL};
    END IF;
    -- every segment but the current one (and the next, about to be), oldest first, that holds pages
    FOR s IN SELECT (cur + k) % nsegs AS seg FROM generate_series(1, nsegs - 2) k
              WHERE pg_relation_size(format('{S}.%I', r || '_' || (cur + k) % nsegs)::regclass) > 0 LOOP
        BEGIN
            EXECUTE format('LOCK TABLE {S}.%I IN ACCESS EXCLUSIVE MODE', r || '_' || s.seg);
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM {S}.%I)', r || '_' || s.seg) INTO nonempty;
            IF NOT nonempty THEN
                EXECUTE format('TRUNCATE {S}.%I', r || '_' || s.seg);
                n := n + 1;
            END IF;
        EXCEPTION WHEN lock_not_available THEN NULL;
        END;
    END LOOP;
    RETURN n;
END $fn$;
""")
p(f"""
-- One segment per transaction: the ACCESS EXCLUSIVE lock is held for one TRUNCATE only.
CREATE PROCEDURE {S}.truncate_drained_each(r text) LANGUAGE plpgsql AS $fn$
DECLARE k int; nonempty boolean; cur int; nsegs int;
BEGIN
    IF r = 'ready' THEN
        SELECT (last_value / {SR}) % {NR} INTO cur FROM {S}.ready_ticket; nsegs := {NR};
    ELSE
        SELECT (last_value / {SL}) % {NL} INTO cur FROM {S}.claim_ticket; nsegs := {NL};
    END IF;
    FOR k IN SELECT (cur + d) % nsegs FROM generate_series(1, nsegs - 2) d LOOP
        CONTINUE WHEN pg_relation_size(format('{S}.%I', r || '_' || k)::regclass) = 0;
        PERFORM set_config('lock_timeout', '20ms', true);
        BEGIN
            EXECUTE format('LOCK TABLE {S}.%I IN ACCESS EXCLUSIVE MODE', r || '_' || k);
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM {S}.%I)', r || '_' || k) INTO nonempty;
            IF NOT nonempty THEN
                EXECUTE format('TRUNCATE {S}.%I', r || '_' || k);
            END IF;
        EXCEPTION WHEN lock_not_available THEN NULL;
        END;
        COMMIT;
    END LOOP;
END $fn$;

CREATE FUNCTION {S}.truncate_expired(retention interval) RETURNS int LANGUAGE plpgsql AS $fn$
DECLARE k int; n int := 0; cur int; newest timestamptz;
BEGIN
    PERFORM set_config('lock_timeout', '20ms', true);
    cur := (extract(epoch FROM now())::bigint / {PD}) % {ND};
    FOR k IN SELECT (cur + d) % {ND} FROM generate_series(1, {ND} - 1) d LOOP
        CONTINUE WHEN pg_relation_size(format('{S}.done_%s', k)::regclass) = 0;
        BEGIN
            EXECUTE format('LOCK TABLE {S}.done_%s IN ACCESS EXCLUSIVE MODE', k);
            EXECUTE format('SELECT max(finished_at) FROM {S}.done_%s', k) INTO newest;
            IF newest IS NULL OR newest < now() - retention THEN
                EXECUTE format('TRUNCATE {S}.done_%s', k);
                n := n + 1;
            END IF;
        EXCEPTION WHEN lock_not_available THEN NULL;
        END;
    END LOOP;
    RETURN n;
END $fn$;
""")
print("\n".join(out))
