-- Serialises concurrent migrations until the transaction ends. $1 the lockwise advisory class.
SELECT pg_advisory_xact_lock($1, 1)
