-- The dead letters of one queue, oldest first. $1 queue, $2 limit
SELECT id, payload, attempt, last_error, errors FROM {schema}.dead
 WHERE queue = $1 ORDER BY finished_at, id LIMIT $2
