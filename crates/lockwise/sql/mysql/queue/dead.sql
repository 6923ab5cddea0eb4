-- The dead letters of one queue, oldest first. ? queue, ? limit
SELECT CAST(id AS SIGNED) AS id, payload, attempt, last_error,
       COALESCE(errors, '[]') AS errors
  FROM {jobs} WHERE queue = ? AND state = 'dead' ORDER BY finished_at, id LIMIT ?
