-- Whether this transaction is the schema's only reaper (held until it ends; never waits).
-- $1 the lockwise advisory class. The key string is fixed: other versions must agree on it.
SELECT pg_try_advisory_xact_lock($1, hashtext('{schema}.reaper'))
