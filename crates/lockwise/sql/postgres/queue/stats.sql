-- Job counts of one queue by state; the counts do not overlap (`ready` is available now,
-- `scheduled` available later: delayed, or waiting to retry). $1 queue
SELECT count(*) FILTER (WHERE state = 'available' AND run_at <= now()) AS ready,
       count(*) FILTER (WHERE state = 'available' AND run_at > now()) AS scheduled,
       count(*) FILTER (WHERE state = 'running') AS running,
       count(*) FILTER (WHERE state = 'done') AS done,
       count(*) FILTER (WHERE state = 'dead') AS dead,
       count(*) FILTER (WHERE state = 'cancelled') AS cancelled
  FROM {schema}.jobs WHERE queue = $1
