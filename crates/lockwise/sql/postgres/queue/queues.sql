-- Every queue with a job in any state, or finished counts kept, by name. The finished
-- history, the ready jobs, the scheduled ones and the dead letters are read through an index
-- that starts with the queue, a name at a time (a skip scan), never row by row: a backlog of
-- 100k jobs costs a few index probes.
WITH RECURSIVE history AS (
    SELECT min(queue) AS queue FROM {schema}.done
    UNION ALL
    SELECT (SELECT min(d.queue) FROM {schema}.done d WHERE d.queue > h.queue)
      FROM history h WHERE h.queue IS NOT NULL
),
ready AS (
    SELECT min(queue) AS queue FROM {schema}.ready
    UNION ALL
    SELECT (SELECT min(r.queue) FROM {schema}.ready r WHERE r.queue > w.queue)
      FROM ready w WHERE w.queue IS NOT NULL
),
scheduled AS (
    SELECT min(queue) AS queue FROM {schema}.scheduled
    UNION ALL
    SELECT (SELECT min(s.queue) FROM {schema}.scheduled s WHERE s.queue > w.queue)
      FROM scheduled w WHERE w.queue IS NOT NULL
),
dead AS (
    SELECT min(queue) AS queue FROM {schema}.dead
    UNION ALL
    SELECT (SELECT min(d.queue) FROM {schema}.dead d WHERE d.queue > w.queue)
      FROM dead w WHERE w.queue IS NOT NULL
)
SELECT queue FROM history WHERE queue IS NOT NULL
UNION SELECT queue FROM ready WHERE queue IS NOT NULL
UNION SELECT queue FROM scheduled WHERE queue IS NOT NULL
UNION SELECT queue FROM dead WHERE queue IS NOT NULL
UNION SELECT queue FROM {schema}.leases
UNION SELECT queue FROM {schema}.done_counts WHERE n > 0
ORDER BY 1
