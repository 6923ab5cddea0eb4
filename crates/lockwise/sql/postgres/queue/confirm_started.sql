-- One branch of the function {schema}.confirm_started (v5.sql), called by confirm_call.sql:
-- a change here needs a migration that replaces the function.
-- Confirms that a worker received its claim and starts these jobs of one lease segment
-- (compare-and-set on id and attempt, so a confirmation that arrives after a rescue confirms
-- nothing). A HOT update: `started` is in no index. {leases} and {segment} are ack.sql's.
-- The function turns `synchronous_commit` off for its transaction only: a confirmation lost
-- in a server crash leaves the job claimed but not started, which the reaper gives back
-- without counting the attempt, the same as a confirmation whose answer was lost. The claim,
-- which raises the attempt number (the fencing token), stays a durable commit, so no attempt
-- number is ever handed out twice.
-- $1 ids, $2 attempts, $3 their lease segments (parameters of the function)
UPDATE {leases} l
   SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS f(id, attempt, seg)
 WHERE l.id = f.id AND l.attempt = f.attempt AND {segment}
RETURNING l.id
