-- The queue jobs' effect: the user's own table, keyed by job so that an effect lands once.
CREATE TABLE {schema}.lab_effects (job_id bigint PRIMARY KEY, worker text NOT NULL)
