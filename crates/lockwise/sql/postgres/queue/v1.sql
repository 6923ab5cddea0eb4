-- Queue schema, version 1. {schema} is the quoted, validated schema name; {channel} the
-- NOTIFY channel. Applied once, under an advisory lock, by Queue::migrate.

CREATE SCHEMA IF NOT EXISTS {schema};

CREATE TABLE {schema}.jobs (
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
CREATE INDEX jobs_claim ON {schema}.jobs (queue, priority, run_at, id) WHERE state = 'available';
-- The reaper's scan.
CREATE INDEX jobs_leases ON {schema}.jobs (lease_until) WHERE state = 'running';
-- Retention and dead letters.
CREATE INDEX jobs_finished ON {schema}.jobs (queue, state, finished_at) WHERE state IN ('done', 'dead');
-- A duplicate idempotency key returns the existing job.
CREATE UNIQUE INDEX jobs_idempotency ON {schema}.jobs (queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Wake workers: one notification per queue and transaction (identical ones are folded).
CREATE FUNCTION {schema}.notify_job() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('{channel}', NEW.queue);
    RETURN NULL;
END
$fn$;
CREATE TRIGGER jobs_notify AFTER INSERT ON {schema}.jobs
    FOR EACH ROW WHEN (NEW.state = 'available') EXECUTE FUNCTION {schema}.notify_job();
