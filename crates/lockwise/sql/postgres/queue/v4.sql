-- Queue schema, version 4: one table per stage of a job's life instead of one table updated
-- in place, so that sustained load leaves no pile of dead row versions behind (the design,
-- its measurements and its trade-offs: docs/design/queue-layout-v4.md, and the module doc of
-- queue/postgres.rs). {schema} is the quoted, validated schema name; {channel} the NOTIFY
-- channel. Applied once, in one transaction, under the migration lock; the jobs of version 3
-- are carried over, those in flight with their attempt (the fencing token) and lease.
--
--   ready      jobs due (a ring of 16 segments, reset by TRUNCATE once drained)
--   scheduled  delayed jobs and retries waiting for their backoff
--   leases     claimed jobs (a ring of 16 segments, reset by TRUNCATE once drained)
--   done       finished history, done and cancelled (insert-only)
--   dead       dead letters
--   keys       idempotency keys, across every stage
--
-- A job is in exactly one of ready, scheduled, leases, done and dead at any time: every move
-- is one statement (DELETE … RETURNING feeding an INSERT).

LOCK TABLE {schema}.jobs IN ACCESS EXCLUSIVE MODE;

CREATE SEQUENCE {schema}.job_id;
-- The rings' clocks: a row's segment is a function of its ticket, (ticket / size) % segments.
CREATE SEQUENCE {schema}.ready_ticket MINVALUE 0 START 0;
CREATE SEQUENCE {schema}.claim_ticket MINVALUE 0 START 0;

CREATE TABLE {schema}.ready (
    seg             smallint    NOT NULL
                    DEFAULT ((nextval('{schema}.ready_ticket') / 500) % 16)::smallint,
    id              bigint      NOT NULL,
    queue           text        NOT NULL,
    priority        smallint    NOT NULL DEFAULT 0,
    run_at          timestamptz NOT NULL DEFAULT now(),
    payload         jsonb       NOT NULL,
    attempt         integer     NOT NULL DEFAULT 0,
    max_attempts    integer     NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    idempotency_key text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    errors          jsonb       NOT NULL DEFAULT '[]'
) PARTITION BY LIST (seg);
CREATE INDEX ready_claim ON {schema}.ready (queue, priority, run_at, id);
CREATE INDEX ready_id ON {schema}.ready (id);

CREATE TABLE {schema}.scheduled (
    id              bigint      PRIMARY KEY,
    queue           text        NOT NULL,
    priority        smallint    NOT NULL DEFAULT 0,
    run_at          timestamptz NOT NULL,
    payload         jsonb       NOT NULL,
    attempt         integer     NOT NULL DEFAULT 0,
    max_attempts    integer     NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    idempotency_key text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    errors          jsonb       NOT NULL DEFAULT '[]'
);
CREATE INDEX scheduled_due ON {schema}.scheduled (queue, run_at);

-- started and lease_until are not indexed: the confirmation and heartbeats are HOT updates.
CREATE TABLE {schema}.leases (
    seg             smallint    NOT NULL
                    DEFAULT ((nextval('{schema}.claim_ticket') / 200) % 16)::smallint,
    id              bigint      NOT NULL,
    queue           text        NOT NULL,
    priority        smallint    NOT NULL,
    run_at          timestamptz NOT NULL,
    payload         jsonb       NOT NULL,
    -- This execution's attempt: the fencing token every later statement compares.
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
) PARTITION BY LIST (seg);
CREATE INDEX leases_id ON {schema}.leases (id);

DO $ring$
BEGIN
    FOR i IN 0..15 LOOP
        EXECUTE format('CREATE TABLE %s.ready_%s PARTITION OF %s.ready FOR VALUES IN (%s)',
                       '{schema}', i, '{schema}', i);
        EXECUTE format('CREATE TABLE %s.leases_%s PARTITION OF %s.leases FOR VALUES IN (%s) '
                       'WITH (fillfactor = 70)', '{schema}', i, '{schema}', i);
    END LOOP;
END
$ring$;

CREATE TABLE {schema}.done (
    id              bigint      PRIMARY KEY,
    queue           text        NOT NULL,
    state           text        NOT NULL CHECK (state IN ('done', 'cancelled')),
    priority        smallint    NOT NULL,
    run_at          timestamptz NOT NULL,
    payload         jsonb       NOT NULL,
    attempt         integer     NOT NULL,
    max_attempts    integer     NOT NULL,
    idempotency_key text,
    worker          text,
    created_at      timestamptz NOT NULL,
    last_error      text,
    errors          jsonb       NOT NULL,
    finished_at     timestamptz NOT NULL DEFAULT now(),
    -- The transaction that finished the job: counts are sealed up to the oldest transaction
    -- still running, so a late commit is never missed (seal_done.sql).
    xid             xid8        NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX done_recent ON {schema}.done (queue, state, finished_at);
CREATE INDEX done_xid ON {schema}.done (xid);

-- The finished counts, by 10-second bucket of finished_at, of the jobs finished by
-- transactions below done_sealed.until; stats adds the jobs finished since.
CREATE TABLE {schema}.done_counts (
    queue  text        NOT NULL,
    state  text        NOT NULL,
    bucket timestamptz NOT NULL,
    n      bigint      NOT NULL,
    PRIMARY KEY (queue, state, bucket)
);
CREATE TABLE {schema}.done_sealed (
    one   boolean PRIMARY KEY DEFAULT true CHECK (one),
    until xid8    NOT NULL
);
INSERT INTO {schema}.done_sealed (until) VALUES ('0');

CREATE TABLE {schema}.dead (
    id              bigint      PRIMARY KEY,
    queue           text        NOT NULL,
    priority        smallint    NOT NULL,
    run_at          timestamptz NOT NULL,
    payload         jsonb       NOT NULL,
    attempt         integer     NOT NULL,
    max_attempts    integer     NOT NULL,
    idempotency_key text,
    worker          text,
    created_at      timestamptz NOT NULL,
    last_error      text,
    errors          jsonb       NOT NULL,
    finished_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dead_queue ON {schema}.dead (queue, finished_at, id);

-- (queue, key) → the job holding the key, whatever its stage. A key is held until its job's
-- history is pruned, or until a job with a uniqueness window takes it over.
CREATE TABLE {schema}.keys (
    queue      text        NOT NULL,
    key        text        NOT NULL,
    job_id     bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, key)
);
CREATE INDEX keys_job ON {schema}.keys (job_id);

-- Every job whatever its stage, in the columns of version 3 (Queue::job, Queue::list).
CREATE VIEW {schema}.all_jobs AS
SELECT id, queue, CASE WHEN run_at > now() THEN 'scheduled' ELSE 'ready' END AS state,
       priority, run_at, payload, attempt, max_attempts, idempotency_key, NULL::text AS worker,
       created_at, last_error, errors, NULL::timestamptz AS finished_at,
       NULL::timestamptz AS lease_until
  FROM {schema}.ready
UNION ALL
SELECT id, queue, CASE WHEN run_at > now() THEN 'scheduled' ELSE 'ready' END, priority,
       run_at, payload, attempt, max_attempts, idempotency_key, NULL, created_at, last_error,
       errors, NULL, NULL
  FROM {schema}.scheduled
UNION ALL
SELECT id, queue, 'running', priority, run_at, payload, attempt, max_attempts,
       idempotency_key, worker, created_at, last_error, errors, NULL, lease_until
  FROM {schema}.leases
UNION ALL
SELECT id, queue, state, priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors, finished_at, NULL
  FROM {schema}.done
UNION ALL
SELECT id, queue, 'dead', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors, finished_at, NULL
  FROM {schema}.dead;

-- Wakes workers: one notification per queue and statement (a bulk enqueue, a reap: one).
-- Delayed jobs wake nobody: a worker finds them due at its poll.
CREATE FUNCTION {schema}.notify_ready() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('{channel}', q) FROM (SELECT DISTINCT queue AS q FROM new_rows) n;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER ready_notify AFTER INSERT ON {schema}.ready REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.notify_ready();

-- The claim and the confirmation, the statements of every batch, are functions of v5.sql
-- (this migration created their first form, which v5 replaces; it creates none any more, so
-- that a new store does not build what the next migration drops).

-- Empties the drained segments `segs` of a ring ('ready' or 'leases', segments 0 … 15): locks
-- each one in turn, giving up on a segment whose lock does not come within 20 ms (claims
-- queue behind the lock meanwhile), keeps those still empty once locked, and truncates them
-- in one statement, so that a whole pass costs one commit. Does nothing while another
-- maintainer is at work. Returns how many it truncated. SECURITY DEFINER, so that an
-- application user with only EXECUTE on it (and no TRUNCATE privilege) keeps the rings
-- clean; it can empty nothing but empty segments of this schema's rings.
CREATE FUNCTION {schema}.truncate_drained(ring text, segs integer[], class integer)
RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $fn$
DECLARE
    seg integer;
    segment text;
    busy boolean;
    empty text[] := '{}';
BEGIN
    IF ring NOT IN ('ready', 'leases') THEN
        RAISE EXCEPTION 'no ring %', ring;
    END IF;
    IF NOT pg_try_advisory_xact_lock(class, hashtext('{schema}.rings')) THEN
        RETURN 0;
    END IF;
    PERFORM set_config('lock_timeout', '20ms', true);
    FOREACH seg IN ARRAY coalesce((SELECT array_agg(DISTINCT s ORDER BY s) FROM unnest(segs) s), '{}') LOOP
        IF seg NOT BETWEEN 0 AND 15 THEN
            RAISE EXCEPTION 'no ring segment %_%', ring, seg;
        END IF;
        segment := format('%s.%I', '{schema}', ring || '_' || seg);
        BEGIN
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', segment);
        EXCEPTION WHEN lock_not_available THEN
            CONTINUE;
        END;
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', segment) INTO STRICT busy;
        IF NOT busy THEN
            empty := empty || segment;
        END IF;
    END LOOP;
    IF cardinality(empty) > 0 THEN
        EXECUTE 'TRUNCATE ' || array_to_string(empty, ', ');
    END IF;
    RETURN cardinality(empty);
END
$fn$;
REVOKE EXECUTE ON FUNCTION {schema}.truncate_drained(text, integer[], integer) FROM PUBLIC;

-- Carry the jobs of version 3 over. Ids go on after the last one version 3 drew, pruned or
-- not, so that no id is ever reused.
SELECT setval('{schema}.job_id',
              greatest(coalesce((SELECT max(id) FROM {schema}.jobs), 0),
                       coalesce(pg_sequence_last_value(
                           pg_get_serial_sequence('{schema}.jobs', 'id')::regclass), 0)) + 1,
              false);

INSERT INTO {schema}.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                            idempotency_key, created_at, last_error, errors)
SELECT id, queue, priority, run_at, payload, attempt, max_attempts,
       coalesce(idempotency_key, released_key), created_at, last_error, errors
  FROM {schema}.jobs WHERE state = 'available' AND run_at <= now()
 ORDER BY priority, run_at, id;

INSERT INTO {schema}.scheduled (id, queue, priority, run_at, payload, attempt, max_attempts,
                                idempotency_key, created_at, last_error, errors)
SELECT id, queue, priority, run_at, payload, attempt, max_attempts,
       coalesce(idempotency_key, released_key), created_at, last_error, errors
  FROM {schema}.jobs WHERE state = 'available' AND run_at > now();

-- In flight: the same attempt (its worker still completes it), lease and started flag.
INSERT INTO {schema}.leases (id, queue, priority, run_at, payload, attempt, max_attempts,
                             idempotency_key, created_at, last_error, errors, started,
                             lease_until, worker)
SELECT id, queue, priority, run_at, payload, attempt, max_attempts,
       coalesce(idempotency_key, released_key), created_at, last_error, errors, started,
       coalesce(lease_until, now()), worker
  FROM {schema}.jobs WHERE state = 'running';

INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors, finished_at)
SELECT id, queue, state, priority, run_at, payload, attempt, max_attempts,
       coalesce(idempotency_key, released_key), worker, created_at, last_error, errors,
       coalesce(finished_at, now())
  FROM {schema}.jobs WHERE state IN ('done', 'cancelled');

INSERT INTO {schema}.dead (id, queue, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors, finished_at)
SELECT id, queue, priority, run_at, payload, attempt, max_attempts,
       coalesce(idempotency_key, released_key), worker, created_at, last_error, errors,
       coalesce(finished_at, now())
  FROM {schema}.jobs WHERE state = 'dead';

INSERT INTO {schema}.keys (queue, key, job_id, created_at)
SELECT queue, idempotency_key, id, created_at
  FROM {schema}.jobs WHERE idempotency_key IS NOT NULL;

DROP TABLE {schema}.jobs;
DROP FUNCTION {schema}.notify_job();
