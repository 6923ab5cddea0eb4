-- Marks jobs done, compare-and-set on (id, attempt) and the running state, so a worker whose
-- job was rescued cannot complete it late. $1 ids, $2 attempts
UPDATE {schema}.jobs j
   SET state = 'done', finished_at = now(), lease_until = NULL
  FROM unnest($1::bigint[], $2::int[]) AS f(id, attempt)
 WHERE j.id = f.id AND j.attempt = f.attempt AND j.state = 'running'
