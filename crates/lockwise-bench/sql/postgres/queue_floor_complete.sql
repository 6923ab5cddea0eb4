-- The throughput floor's completion of a claimed batch. $1 ids
UPDATE {schema}.floor_jobs SET state = 'done', finished_at = now(), lease_until = NULL
 WHERE id = ANY($1)
