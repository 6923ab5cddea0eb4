-- Queue schema, version 1. cur is the quoted, validated schema name; cur_jobs the
-- NOTIFY channel. Applied once, under an advisory lock, by Queue::migrate.

CREATE SCHEMA IF NOT EXISTS cur;

CREATE TABLE cur.jobs (
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
CREATE INDEX jobs_claim ON cur.jobs (queue, priority, run_at, id) WHERE state = 'available';
-- The reaper's scan.
CREATE INDEX jobs_leases ON cur.jobs (lease_until) WHERE state = 'running';
-- Retention and dead letters.
CREATE INDEX jobs_finished ON cur.jobs (queue, state, finished_at) WHERE state IN ('done', 'dead');
-- A duplicate idempotency key returns the existing job.
CREATE UNIQUE INDEX jobs_idempotency ON cur.jobs (queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Wake workers: one notification per queue and transaction (identical ones are folded).
CREATE FUNCTION cur.notify_job() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('cur_jobs', NEW.queue);
    RETURN NULL;
END
$fn$;
CREATE TRIGGER jobs_notify AFTER INSERT ON cur.jobs
    FOR EACH ROW WHEN (NEW.state = 'available') EXECUTE FUNCTION cur.notify_job();
-- Queue schema, version 2: a claimed job is not started until its worker confirms it
-- (confirm_started.sql), so that the reaper can tell a claim whose answer was lost (no
-- execution: the attempt is not counted) from an execution that ran out of lease. Rows of
-- version 1 were started when claimed: they default to true. Outside the window between a
-- claim and its confirmation the column is always true, so version-1 workers still see the
-- old semantics. cur is the quoted, validated schema name.
ALTER TABLE cur.jobs ADD COLUMN started boolean NOT NULL DEFAULT true;
-- Queue schema, version 3: a job can be cancelled (`lockwise queue cancel`, Queue::cancel):
-- a ready, scheduled or running job goes to the finished state 'cancelled', kept for
-- inspection and pruned like done jobs. cur is the quoted, validated schema name.
ALTER TABLE cur.jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE cur.jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('available', 'running', 'done', 'dead', 'cancelled'));
DROP INDEX cur.jobs_finished;
CREATE INDEX jobs_finished ON cur.jobs (queue, state, finished_at)
    WHERE state IN ('done', 'dead', 'cancelled');
-- An idempotency key may be unique for a window only (Job::unique_for): a job enqueued with
-- the key after the window releases it from the older job, which keeps it here for
-- inspection. The unique index is unchanged, so workers of version 2 still enqueue.
ALTER TABLE cur.jobs ADD COLUMN released_key text;
