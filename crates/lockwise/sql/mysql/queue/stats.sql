-- Job counts of one queue by state; the counts do not overlap (`ready` is available now,
-- `scheduled` available later: delayed, or waiting to retry); oldest_ready_us: how long the
-- oldest ready job has been due (NULL: none is). ? queue
SELECT CAST(COALESCE(SUM(state = 'available' AND run_at <= NOW(6)), 0) AS SIGNED) AS ready,
       CAST(COALESCE(SUM(state = 'available' AND run_at > NOW(6)), 0) AS SIGNED) AS scheduled,
       CAST(COALESCE(SUM(state = 'running'), 0) AS SIGNED) AS running,
       CAST(COALESCE(SUM(state = 'done'), 0) AS SIGNED) AS done,
       CAST(COALESCE(SUM(state = 'dead'), 0) AS SIGNED) AS dead,
       CAST(COALESCE(SUM(state = 'cancelled'), 0) AS SIGNED) AS cancelled,
       TIMESTAMPDIFF(MICROSECOND,
                     MIN(CASE WHEN state = 'available' AND run_at <= NOW(6) THEN run_at END),
                     NOW(6)) AS oldest_ready_us
  FROM {jobs} WHERE queue = ?
