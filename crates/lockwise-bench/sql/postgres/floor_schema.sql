-- The floor's own queue table: what a hand-written SKIP LOCKED queue keeps, one row per job
-- updated in place, beside lockwise's store in the bench's schema. {schema} is the quoted,
-- validated schema name of the bench's own store.
CREATE TABLE IF NOT EXISTS {schema}.floor_jobs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue       text        NOT NULL,
    state       text        NOT NULL DEFAULT 'available',
    priority    smallint    NOT NULL DEFAULT 0,
    run_at      timestamptz NOT NULL DEFAULT now(),
    payload     jsonb       NOT NULL,
    attempt     integer     NOT NULL DEFAULT 0,
    lease_until timestamptz,
    finished_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS floor_jobs_claim ON {schema}.floor_jobs (queue, priority, run_at, id)
    WHERE state = 'available';
