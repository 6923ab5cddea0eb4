-- SKIP LOCKED, as the lesson writes it: one statement claims up to $1 jobs that no other
-- worker has locked. $1 batch size, $2 worker. {schema} is the quoted, validated schema name.
UPDATE {schema}.jobs SET state = 'running', worker = $2, started_at = now()
 WHERE id IN (
    SELECT id FROM {schema}.jobs
     WHERE state = 'pending'
     ORDER BY created_at
     LIMIT $1
       FOR UPDATE SKIP LOCKED
 )
RETURNING id
