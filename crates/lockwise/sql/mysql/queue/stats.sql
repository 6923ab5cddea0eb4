-- Job counts of one queue by state; `scheduled` is the part of `pending` not ready yet.
-- ? queue
SELECT CAST(COALESCE(SUM(state = 'available'), 0) AS SIGNED) AS pending,
       CAST(COALESCE(SUM(state = 'available' AND run_at > NOW(6)), 0) AS SIGNED) AS scheduled,
       CAST(COALESCE(SUM(state = 'running'), 0) AS SIGNED) AS running,
       CAST(COALESCE(SUM(state = 'done'), 0) AS SIGNED) AS done,
       CAST(COALESCE(SUM(state = 'dead'), 0) AS SIGNED) AS dead
  FROM {jobs} WHERE queue = ?
