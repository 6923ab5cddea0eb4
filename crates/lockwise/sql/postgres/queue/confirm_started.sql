-- Confirms that a worker received its claim and starts these jobs (compare-and-set on id and
-- attempt, so a confirmation that arrives after a rescue confirms nothing).
-- $1 ids, $2 attempts
UPDATE {schema}.jobs j
   SET started = true
  FROM unnest($1::bigint[], $2::int[]) AS c(id, attempt)
 WHERE j.id = c.id AND j.attempt = c.attempt AND j.state = 'running'
RETURNING j.id
