-- Queue schema, version 3: a job can be cancelled (`lockwise queue cancel`, Queue::cancel):
-- a ready, scheduled or running job goes to the finished state 'cancelled', kept for
-- inspection and pruned like done jobs. {schema} is the quoted, validated schema name.
ALTER TABLE {schema}.jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE {schema}.jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('available', 'running', 'done', 'dead', 'cancelled'));
DROP INDEX {schema}.jobs_finished;
CREATE INDEX jobs_finished ON {schema}.jobs (queue, state, finished_at)
    WHERE state IN ('done', 'dead', 'cancelled');
-- An idempotency key may be unique for a window only (Job::unique_for): a job enqueued with
-- the key after the window releases it from the older job, which keeps it here for
-- inspection. The unique index is unchanged, so workers of version 2 still enqueue.
ALTER TABLE {schema}.jobs ADD COLUMN released_key text;
