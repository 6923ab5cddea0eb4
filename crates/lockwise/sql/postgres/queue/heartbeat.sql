-- Extends the leases of jobs a worker is still running (compare-and-set on id and attempt).
-- $1 ids, $2 attempts, $3 lease (seconds)
UPDATE {schema}.jobs j
   SET lease_until = now() + make_interval(secs => $3)
  FROM unnest($1::bigint[], $2::int[]) AS r(id, attempt)
 WHERE j.id = r.id AND j.attempt = r.attempt AND j.state = 'running'
RETURNING j.id
