-- The bench floor's release. $1, $2 the key
SELECT pg_advisory_unlock($1, $2)
