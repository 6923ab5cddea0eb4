-- Extends the leases of jobs a worker is still running (compare-and-set on id and attempt; a
-- HOT update, `lease_until` is in no index). A job missing from the answer was rescued or
-- cancelled. $1 ids, $2 attempts, $3 lease (seconds)
UPDATE {schema}.leases l
   SET lease_until = now() + make_interval(secs => $3)
  FROM unnest($1::bigint[], $2::int[]) AS r(id, attempt)
 WHERE l.id = ANY($1::bigint[]) AND l.id = r.id AND l.attempt = r.attempt
RETURNING l.id
