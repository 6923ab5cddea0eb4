DROP SCHEMA IF EXISTS m CASCADE;
-- Queue schema, version 1. m is the quoted, validated schema name; m_jobs the
-- NOTIFY channel. Applied once, under an advisory lock, by Queue::migrate.

CREATE SCHEMA IF NOT EXISTS m;

CREATE TABLE m.jobs (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue           text        NOT NULL,
    -- available: ready (run_at <= now), scheduled or waiting to retry (run_at > now)
    -- running:   claimed by a worker until lease_until
    -- done, dead: finished (dead = attempts used up, or failed for good)
    state           text        NOT NULL DEFAULT 'available'
                    CHECK (state IN ('available', 'running', 'done', 'dead')),
    priority        smallint    NOT NULL DEFAULT 0,  -- lower runs first
    run_at          timestamptz NOT NULL DEFAULT now(),
    payload         jsonb       NOT NULL,
    -- The attempt number is the job's fencing token: complete and fail compare it.
    attempt         integer     NOT NULL DEFAULT 0,
    max_attempts    integer     NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    idempotency_key text,
    lease_until     timestamptz,
    worker          text,
    last_error      text,
    errors          jsonb       NOT NULL DEFAULT '[]',
    created_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz
) WITH (
    -- Jobs are updated several times each: leave room for HOT updates and vacuum often, so
    -- dead tuples stay bounded under sustained load.
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0
);

-- The claim's order, over available rows only.
CREATE INDEX jobs_claim ON m.jobs (queue, priority, run_at, id) WHERE state = 'available';
-- The reaper's scan.
CREATE INDEX jobs_leases ON m.jobs (lease_until) WHERE state = 'running';
-- Retention and dead letters.
CREATE INDEX jobs_finished ON m.jobs (queue, state, finished_at) WHERE state IN ('done', 'dead');
-- A duplicate idempotency key returns the existing job.
CREATE UNIQUE INDEX jobs_idempotency ON m.jobs (queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Wake workers: one notification per queue and transaction (identical ones are folded).
CREATE FUNCTION m.notify_job() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('m_jobs', NEW.queue);
    RETURN NULL;
END
$fn$;
CREATE TRIGGER jobs_notify AFTER INSERT ON m.jobs
    FOR EACH ROW WHEN (NEW.state = 'available') EXECUTE FUNCTION m.notify_job();
-- Queue schema, version 2: a claimed job is not started until its worker confirms it
-- (confirm_started.sql), so that the reaper can tell a claim whose answer was lost (no
-- execution: the attempt is not counted) from an execution that ran out of lease. Rows of
-- version 1 were started when claimed: they default to true. Outside the window between a
-- claim and its confirmation the column is always true, so version-1 workers still see the
-- old semantics. m is the quoted, validated schema name.
ALTER TABLE m.jobs ADD COLUMN started boolean NOT NULL DEFAULT true;
-- Queue schema, version 3: a job can be cancelled (`lockwise queue cancel`, Queue::cancel):
-- a ready, scheduled or running job goes to the finished state 'cancelled', kept for
-- inspection and pruned like done jobs. m is the quoted, validated schema name.
ALTER TABLE m.jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE m.jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('available', 'running', 'done', 'dead', 'cancelled'));
DROP INDEX m.jobs_finished;
CREATE INDEX jobs_finished ON m.jobs (queue, state, finished_at)
    WHERE state IN ('done', 'dead', 'cancelled');
-- An idempotency key may be unique for a window only (Job::unique_for): a job enqueued with
-- the key after the window releases it from the older job, which keeps it here for
-- inspection. The unique index is unchanged, so workers of version 2 still enqueue.
ALTER TABLE m.jobs ADD COLUMN released_key text;

INSERT INTO m.jobs (queue, payload, state, run_at, attempt, idempotency_key) VALUES
 ('q', '{"n":1}', 'available', now(), 0, NULL),
 ('q', '{"n":2}', 'available', now() + interval '1 h', 1, 'kd'),
 ('q', '{"n":3}', 'running', now(), 2, NULL),
 ('q', '{"n":4}', 'running', now(), 1, NULL),
 ('q', '{"n":5}', 'done', now(), 1, 'kdone'),
 ('q', '{"n":6}', 'dead', now(), 5, NULL),
 ('q', '{"n":7}', 'cancelled', now(), 0, NULL);
UPDATE m.jobs SET lease_until = now() + interval '30 s', started = true, worker = 'old' WHERE id = 3;
UPDATE m.jobs SET lease_until = now() - interval '1 s', started = false, worker = 'old' WHERE id = 4;
UPDATE m.jobs SET finished_at = now() WHERE state IN ('done','dead','cancelled');
BEGIN;
LOCK TABLE m.jobs IN ACCESS EXCLUSIVE MODE;   -- waits for in-flight v3 statements
CREATE SEQUENCE m.job_id;        -- setval'ed from v3's max(id) by the migration
CREATE SEQUENCE m.ready_ticket;  -- the ready ring's clock: one value per ready row
CREATE SEQUENCE m.claim_ticket;  -- the lease ring's clock: one value per claim

CREATE TABLE m.ring_config (
    ring     text PRIMARY KEY,          -- 'ready', 'leases', 'done'
    segments integer NOT NULL,
    size     bigint  NOT NULL           -- rows per segment (ready, leases) or seconds (done)
);

-- Jobs due now. Only INSERT (enqueue, promote, retry now, reap, hand back) and the claim's DELETE.
CREATE TABLE m.ready (
    seg             smallint    NOT NULL DEFAULT ((nextval('m.ready_ticket') / 500) % 16),
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
CREATE INDEX ready_claim ON m.ready (queue, priority, run_at, id);
CREATE INDEX ready_id    ON m.ready (id);
-- CREATE TABLE m.ready_0 PARTITION OF m.ready FOR VALUES IN (0); … ready_15

-- Delayed jobs and retries waiting for their backoff. Promoted into ready when due.
CREATE TABLE m.scheduled (
    id bigint PRIMARY KEY, queue text NOT NULL, priority smallint NOT NULL, run_at timestamptz NOT NULL,
    payload jsonb NOT NULL, attempt integer NOT NULL, max_attempts integer NOT NULL,
    idempotency_key text, created_at timestamptz NOT NULL, last_error text, errors jsonb NOT NULL
);
CREATE INDEX scheduled_due ON m.scheduled (run_at);
CREATE INDEX scheduled_queue ON m.scheduled (queue, run_at);

-- Claimed jobs. started/lease_until/worker are not indexed: confirm and heartbeat are HOT.
CREATE TABLE m.leases (
    seg             smallint    NOT NULL DEFAULT ((nextval('m.claim_ticket') / 400) % 16),
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
CREATE INDEX leases_id ON m.leases (id);
-- leases_0 … leases_15

-- Finished history: insert-only time ring; retention = TRUNCATE.
CREATE TABLE m.done (
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
CREATE INDEX done_id     ON m.done (id);
CREATE INDEX done_recent ON m.done (queue, state, finished_at);
-- done_0 … done_7

-- Per sealed done slot, its counts (so stats never scans history). Written once per slot.
CREATE TABLE m.done_counts (
    seg smallint NOT NULL, queue text NOT NULL, state text NOT NULL, n bigint NOT NULL,
    sealed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (seg, queue, state)
);

-- Dead letters: kept until retried or purged.
CREATE TABLE m.dead (
    id bigint PRIMARY KEY, queue text NOT NULL, priority smallint NOT NULL, attempt integer NOT NULL,
    max_attempts integer NOT NULL, idempotency_key text, payload jsonb NOT NULL, worker text,
    last_error text, errors jsonb NOT NULL, created_at timestamptz NOT NULL,
    run_at timestamptz NOT NULL, finished_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dead_queue ON m.dead (queue, finished_at, id);

-- Idempotency keys across every state: (queue, key) → the job that holds it.
CREATE TABLE m.keys (
    queue      text        NOT NULL,
    key        text        NOT NULL,
    job_id     bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, key)
);

-- Wake-ups: one notification per queue and statement (bulk enqueue → one NOTIFY).
CREATE FUNCTION m.notify_ready() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('m_jobs', q) FROM (SELECT DISTINCT queue AS q FROM new_rows) n;
    RETURN NULL;
END $fn$;
CREATE TRIGGER ready_notify AFTER INSERT ON m.ready REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION m.notify_ready();
CREATE TABLE m.ready_0 PARTITION OF m.ready FOR VALUES IN (0);
CREATE TABLE m.ready_1 PARTITION OF m.ready FOR VALUES IN (1);
CREATE TABLE m.ready_2 PARTITION OF m.ready FOR VALUES IN (2);
CREATE TABLE m.ready_3 PARTITION OF m.ready FOR VALUES IN (3);
CREATE TABLE m.ready_4 PARTITION OF m.ready FOR VALUES IN (4);
CREATE TABLE m.ready_5 PARTITION OF m.ready FOR VALUES IN (5);
CREATE TABLE m.ready_6 PARTITION OF m.ready FOR VALUES IN (6);
CREATE TABLE m.ready_7 PARTITION OF m.ready FOR VALUES IN (7);
CREATE TABLE m.ready_8 PARTITION OF m.ready FOR VALUES IN (8);
CREATE TABLE m.ready_9 PARTITION OF m.ready FOR VALUES IN (9);
CREATE TABLE m.ready_10 PARTITION OF m.ready FOR VALUES IN (10);
CREATE TABLE m.ready_11 PARTITION OF m.ready FOR VALUES IN (11);
CREATE TABLE m.ready_12 PARTITION OF m.ready FOR VALUES IN (12);
CREATE TABLE m.ready_13 PARTITION OF m.ready FOR VALUES IN (13);
CREATE TABLE m.ready_14 PARTITION OF m.ready FOR VALUES IN (14);
CREATE TABLE m.ready_15 PARTITION OF m.ready FOR VALUES IN (15);
CREATE TABLE m.leases_0 PARTITION OF m.leases FOR VALUES IN (0);
CREATE TABLE m.leases_1 PARTITION OF m.leases FOR VALUES IN (1);
CREATE TABLE m.leases_2 PARTITION OF m.leases FOR VALUES IN (2);
CREATE TABLE m.leases_3 PARTITION OF m.leases FOR VALUES IN (3);
CREATE TABLE m.leases_4 PARTITION OF m.leases FOR VALUES IN (4);
CREATE TABLE m.leases_5 PARTITION OF m.leases FOR VALUES IN (5);
CREATE TABLE m.leases_6 PARTITION OF m.leases FOR VALUES IN (6);
CREATE TABLE m.leases_7 PARTITION OF m.leases FOR VALUES IN (7);
CREATE TABLE m.leases_8 PARTITION OF m.leases FOR VALUES IN (8);
CREATE TABLE m.leases_9 PARTITION OF m.leases FOR VALUES IN (9);
CREATE TABLE m.leases_10 PARTITION OF m.leases FOR VALUES IN (10);
CREATE TABLE m.leases_11 PARTITION OF m.leases FOR VALUES IN (11);
CREATE TABLE m.leases_12 PARTITION OF m.leases FOR VALUES IN (12);
CREATE TABLE m.leases_13 PARTITION OF m.leases FOR VALUES IN (13);
CREATE TABLE m.leases_14 PARTITION OF m.leases FOR VALUES IN (14);
CREATE TABLE m.leases_15 PARTITION OF m.leases FOR VALUES IN (15);
CREATE TABLE m.done_0 PARTITION OF m.done FOR VALUES IN (0);
CREATE TABLE m.done_1 PARTITION OF m.done FOR VALUES IN (1);
CREATE TABLE m.done_2 PARTITION OF m.done FOR VALUES IN (2);
CREATE TABLE m.done_3 PARTITION OF m.done FOR VALUES IN (3);
CREATE TABLE m.done_4 PARTITION OF m.done FOR VALUES IN (4);
CREATE TABLE m.done_5 PARTITION OF m.done FOR VALUES IN (5);
CREATE TABLE m.done_6 PARTITION OF m.done FOR VALUES IN (6);
CREATE TABLE m.done_7 PARTITION OF m.done FOR VALUES IN (7);
SELECT setval('m.job_id', coalesce((SELECT max(id) FROM m.jobs), 0) + 1, false);

-- ready now / delayed or in backoff
INSERT INTO m.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                            idempotency_key, created_at, last_error, errors)
SELECT id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key, created_at,
       last_error, errors
  FROM m.jobs WHERE state = 'available' AND run_at <= now();
INSERT INTO m.scheduled (id, queue, priority, run_at, payload, attempt, max_attempts,
                                idempotency_key, created_at, last_error, errors)
SELECT id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key, created_at,
       last_error, errors
  FROM m.jobs WHERE state = 'available' AND run_at > now();
-- in flight: same id, same attempt (fencing token), same lease and started flag
INSERT INTO m.leases (id, queue, priority, run_at, payload, attempt, max_attempts,
                             idempotency_key, created_at, last_error, errors, started,
                             lease_until, worker)
SELECT id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key, created_at,
       last_error, errors, started, coalesce(lease_until, now()), worker
  FROM m.jobs WHERE state = 'running';
INSERT INTO m.dead (id, queue, priority, attempt, max_attempts, idempotency_key, payload,
                           worker, last_error, errors, created_at, run_at, finished_at)
SELECT id, queue, priority, attempt, max_attempts, coalesce(idempotency_key, released_key), payload,
       worker, last_error, errors, created_at, run_at, coalesce(finished_at, now())
  FROM m.jobs WHERE state = 'dead';
INSERT INTO m.keys (queue, key, job_id, created_at)
SELECT queue, idempotency_key, id, created_at FROM m.jobs WHERE idempotency_key IS NOT NULL;

-- Finished history stays where it is, read-only, until pruned: no bulk copy of millions of rows
-- inside the migration.
DELETE FROM m.jobs WHERE state IN ('available', 'running', 'dead');
ALTER TABLE m.jobs RENAME TO jobs_v3;
DROP TRIGGER jobs_notify ON m.jobs_v3;
INSERT INTO m.ring_config VALUES ('ready', 16, 500), ('leases', 16, 400), ('done', 8, 14400);
COMMIT;

SELECT 'ready' t, id, attempt, max_attempts FROM m.ready UNION ALL SELECT 'sched', id, attempt, max_attempts FROM m.scheduled
UNION ALL SELECT 'leases', id, attempt, max_attempts FROM m.leases UNION ALL SELECT 'dead', id, attempt, max_attempts FROM m.dead
UNION ALL SELECT 'v3:'||state, id, attempt, max_attempts FROM m.jobs_v3 ORDER BY 2;
SELECT * FROM m.keys; SELECT nextval('m.job_id');
