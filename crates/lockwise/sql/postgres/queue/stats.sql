-- Job counts of one queue by state; `scheduled` is the part of `pending` not ready yet.
-- $1 queue
SELECT count(*) FILTER (WHERE state = 'available') AS pending,
       count(*) FILTER (WHERE state = 'available' AND run_at > now()) AS scheduled,
       count(*) FILTER (WHERE state = 'running') AS running,
       count(*) FILTER (WHERE state = 'done') AS done,
       count(*) FILTER (WHERE state = 'dead') AS dead
  FROM {schema}.jobs WHERE queue = $1
