-- Releases the session lock taken by vacuum_lock.sql. $1 the lockwise advisory class.
SELECT pg_advisory_unlock($1, hashtext('{schema}.vacuum'))
