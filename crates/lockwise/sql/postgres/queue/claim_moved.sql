-- The deletion of the chosen jobs from one ready segment, in claim.sql and claim_any.sql
-- (`{moved}`: one per segment, then their union as `moved`): a change here needs a migration
-- that replaces the functions. By row address (a TID scan), in the segment the row was locked
-- in: a row address means nothing outside its segment, and through the ring's parent each
-- address was looked up in all sixteen segments, whose rows then had to be told apart by id
-- (PostgreSQL 15 does not prune partitions at run time for a DELETE). The row addresses are
-- those `next` locked in this statement: exactly the chosen rows. {k} is the segment.
moved_{k} AS (
    DELETE FROM {schema}.ready_{k} r
     WHERE r.ctid = ANY (ARRAY(SELECT tid FROM chosen WHERE seg = {k}))
    RETURNING r.id, r.queue, r.priority, r.run_at, r.payload, r.attempt, r.max_attempts,
              r.idempotency_key, r.created_at, r.last_error, r.errors
),
