-- Queue tables, version 3: an idempotency key may be unique for a window only
-- (Job::unique_for): a job enqueued with the key after the window releases it from the older
-- job, which keeps it here for inspection. The unique key is unchanged, so workers of version
-- 2 still enqueue. Applied when the column is missing. {jobs} is the validated table name.
-- (Version 3 also brings the 'cancelled' state, which needs no DDL here.)
ALTER TABLE {jobs} ADD COLUMN released_key VARCHAR(255) NULL
