-- Whether this session is the schema's only vacuumer (a session lock, released by
-- vacuum_unlock.sql; never waits). $1 the lockwise advisory class.
SELECT pg_try_advisory_lock($1, hashtext('{schema}.vacuum'))
