-- The body of the function {schema}.confirm_started (v4.sql), called by confirm_call.sql:
-- a change here needs a migration that replaces the function.
-- Confirms that a worker received its claim and starts these jobs (compare-and-set on id and
-- attempt, so a confirmation that arrives after a rescue confirms nothing). A HOT update:
-- `started` is in no index.
-- The commit does not wait for the WAL flush (`synchronous_commit` off for this transaction
-- only): a confirmation lost in a server crash leaves the job claimed but not started, which
-- the reaper gives back without counting the attempt, the same as a confirmation whose
-- answer was lost. The claim, which raises the attempt number (the fencing token), stays a
-- durable commit, so no attempt number is ever handed out twice.
-- $1 ids, $2 attempts
WITH quick AS (SELECT set_config('synchronous_commit', 'off', true) AS setting)
UPDATE {schema}.leases l
   SET started = true
  FROM unnest($1::bigint[], $2::int[]) AS c(id, attempt), quick
 WHERE l.id = ANY($1::bigint[]) AND l.id = c.id AND l.attempt = c.attempt
RETURNING l.id
