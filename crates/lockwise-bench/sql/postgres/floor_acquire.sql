-- The bench floor's acquire: one session advisory lock, no fencing token. $1, $2 the key
SELECT pg_try_advisory_lock($1, $2)
