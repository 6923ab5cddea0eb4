-- Fills the bench's (emptied) lockwise store with $2 no-op jobs of queue $1, ready now: the
-- rows enqueue_many would insert, in one statement (setup, not measured).
-- {schema} is the quoted, validated schema name of the bench's own queue store.
INSERT INTO {schema}.ready (id, queue, payload)
SELECT nextval('{schema}.job_id'), $1, '{}'::jsonb FROM generate_series(1, $2)
