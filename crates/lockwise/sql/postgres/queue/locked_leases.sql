-- The leases named by $1 ids and $2 attempts (compare-and-set on both), locked first, in
-- (segment, id) order, in heartbeat.sql and hand_back.sql (`{locked_leases}`): the order in
-- which an acknowledgement and a confirmation lock them (the functions ack, claim and
-- claim_any of v9.sql, confirm_started of v10.sql: segment by segment in ascending order, each
-- in id order). So a heartbeat, a hand-back, an acknowledgement and a confirmation that
-- share jobs never wait for each other in a cycle, a deadlock that PostgreSQL breaks only
-- after `deadlock_timeout` (1 s), failing one of them. {mode} is the lock's strength.
locked AS MATERIALIZED (
    SELECT l.id
      FROM {schema}.leases l
      JOIN unnest($1::bigint[], $2::int[]) AS r(id, attempt)
        ON l.id = r.id AND l.attempt = r.attempt
     ORDER BY l.seg, l.id
       FOR {mode} OF l
)
