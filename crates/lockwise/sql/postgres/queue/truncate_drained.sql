-- Truncates one drained ring segment if it is still empty once locked (v4.sql's function).
-- $1 the ring ('ready' or 'leases'), $2 the segment (0 … 15), $3 the lockwise advisory class.
SELECT {schema}.truncate_drained($1, $2, $3)
