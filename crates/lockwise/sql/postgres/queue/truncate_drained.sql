-- Truncates one drained ring segment if it is still empty once locked (v4.sql's function).
-- $1 the segment (qualified name), $2 the lockwise advisory class.
SELECT {schema}.truncate_drained($1::regclass, $2)
