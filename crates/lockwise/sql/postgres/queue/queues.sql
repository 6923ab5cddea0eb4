-- Every queue with a job in any state, or finished counts kept, by name. The finished
-- history is read through its index a name at a time (a skip scan), never row by row.
WITH RECURSIVE history AS (
    SELECT min(queue) AS queue FROM {schema}.done
    UNION ALL
    SELECT (SELECT min(d.queue) FROM {schema}.done d WHERE d.queue > h.queue)
      FROM history h WHERE h.queue IS NOT NULL
)
SELECT queue FROM history WHERE queue IS NOT NULL
UNION SELECT queue FROM {schema}.ready
UNION SELECT queue FROM {schema}.scheduled
UNION SELECT queue FROM {schema}.leases
UNION SELECT queue FROM {schema}.dead
UNION SELECT queue FROM {schema}.done_counts WHERE n > 0
ORDER BY 1
