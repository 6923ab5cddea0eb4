-- Key partitioning, as the lesson writes it (`hash(id) % total_workers == worker_index`, the
-- hash of an integer id being the id): worker $4 of $3 claims up to $1 of its own pending
-- jobs. No SKIP LOCKED and no lock: no other worker ever selects these rows. $2 worker.
-- {schema} is the quoted, validated schema name.
UPDATE {schema}.jobs SET state = 'running', worker = $2, started_at = now()
 WHERE id IN (
    SELECT id FROM {schema}.jobs
     WHERE state = 'pending' AND id % $3 = $4
     ORDER BY created_at
     LIMIT $1
 )
RETURNING id
