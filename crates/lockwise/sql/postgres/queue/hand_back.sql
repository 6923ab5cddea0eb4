-- Graceful shutdown: gives unfinished jobs back to available at once. The attempt stays
-- counted (it is the job's fencing token) and the budget grows by one, so a shutdown never
-- uses up a job's attempts. $1 ids, $2 attempts
UPDATE {schema}.jobs j
   SET state = 'available', run_at = now(), lease_until = NULL,
       max_attempts = j.max_attempts + 1
  FROM unnest($1::bigint[], $2::int[]) AS r(id, attempt)
 WHERE j.id = r.id AND j.attempt = r.attempt AND j.state = 'running'
RETURNING j.id
