-- One branch of the function {schema}.confirm_started since v10.sql: a change here needs a
-- migration that replaces the function.
-- Confirms that a worker received its claim and starts these jobs of one lease segment
-- (compare-and-set on id and attempt, so a confirmation that arrives after a rescue confirms
-- nothing), the rows locked first in id order: with the function's segments in ascending
-- order, a heartbeat's (segment, id) order (locked_leases.sql), so a program that heartbeats
-- the jobs of a claim while it confirms them never deadlocks. A HOT update: `started` is in
-- no index. {leases} and {segment} are ack.sql's.
-- {ids} job ids, {attempts} their attempts, {segs} their lease segments (filled in at
-- migration).
WITH locked AS MATERIALIZED (
    SELECT l.id
      FROM {leases} l
      JOIN unnest({ids}::bigint[], {attempts}::int[], {segs}::smallint[]) AS f(id, attempt, seg)
        ON l.id = f.id AND l.attempt = f.attempt AND {segment}
     ORDER BY l.id
       FOR NO KEY UPDATE OF l
)
UPDATE {leases} l
   SET started = true
  FROM locked k
 WHERE l.id = k.id
RETURNING l.id
