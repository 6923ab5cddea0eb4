-- The throughput floor's claim: the naive SKIP LOCKED claim of 10, as a hand-written queue
-- would issue it, with no acknowledgement, confirmation or lease bookkeeping beyond the lease.
-- $1 queue, $2 batch. {schema} is the quoted, validated schema name.
UPDATE {schema}.floor_jobs SET state = 'running', attempt = attempt + 1,
       lease_until = now() + interval '30 seconds'
 WHERE id IN (
    SELECT id FROM {schema}.floor_jobs
     WHERE state = 'available' AND queue = $1 AND run_at <= now()
     ORDER BY priority, run_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
 )
RETURNING id
