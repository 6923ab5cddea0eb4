-- Extends the leases of jobs a worker is still running (compare-and-set on id and attempt; a
-- HOT update, `lease_until` is in no index), locked first in the order of locked_leases.sql.
-- A job missing from the answer was rescued or cancelled. $1 ids, $2 attempts,
-- $3 lease (seconds)
WITH {locked_leases}
UPDATE {schema}.leases l
   SET lease_until = now() + make_interval(secs => $3)
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id
