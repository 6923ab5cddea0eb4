-- Extends the leases of jobs a worker is still running (compare-and-set on id and attempt; a
-- HOT update, `lease_until` is in no index). A job missing from the answer was rescued or
-- cancelled. The rows are locked first, in (segment, id) order, the order in which an
-- acknowledgement locks them (ack.sql): the two never deadlock. $1 ids, $2 attempts,
-- $3 lease (seconds)
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases l
      JOIN unnest($1::bigint[], $2::int[]) AS r(id, attempt)
        ON l.id = r.id AND l.attempt = r.attempt
     ORDER BY l.seg, l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {schema}.leases l
   SET lease_until = now() + make_interval(secs => $3)
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id
