-- Job counts of one queue by state; the counts do not overlap (`ready` is due now,
-- `scheduled` due later: delayed, or waiting to retry). Never scans the finished history:
-- done and cancelled jobs are the sealed counts plus the jobs finished since (seal_done.sql)
-- and not pruned (done_cutoffs, v11.sql).
-- oldest_ready_secs: how long the oldest ready job has been due (NULL: none is).
-- $1 queue
-- The waiting jobs are counted in one pass over each table (due now, and due later).
WITH sealed AS (SELECT until FROM {schema}.done_sealed),
waiting AS MATERIALIZED (
    SELECT count(*) FILTER (WHERE run_at <= now()) AS due,
           count(*) FILTER (WHERE run_at > now()) AS later
      FROM {schema}.ready WHERE queue = $1
    UNION ALL
    SELECT count(*) FILTER (WHERE run_at <= now()), count(*) FILTER (WHERE run_at > now())
      FROM {schema}.scheduled WHERE queue = $1
)
SELECT (SELECT sum(due) FROM waiting)::bigint AS ready,
       (SELECT sum(later) FROM waiting)::bigint AS scheduled,
       (SELECT count(*) FROM {schema}.leases WHERE queue = $1) AS running,
       (SELECT coalesce(sum(n), 0) FROM {schema}.done_counts
         WHERE queue = $1 AND state = 'done')::bigint
     + (SELECT count(*) FROM {schema}.done d
         WHERE queue = $1 AND state = 'done' AND xid >= (SELECT until FROM sealed)
           AND NOT EXISTS (SELECT 1 FROM {schema}.done_cutoffs c
                            WHERE c.queue IN ($1, '') AND c.state = d.state
                              AND d.finished_at < c.before AND pg_visible_in_snapshot(d.xid, c.seen)))
         AS done,
       (SELECT count(*) FROM {schema}.dead WHERE queue = $1) AS dead,
       (SELECT coalesce(sum(n), 0) FROM {schema}.done_counts
         WHERE queue = $1 AND state = 'cancelled')::bigint
     + (SELECT count(*) FROM {schema}.done d
         WHERE queue = $1 AND state = 'cancelled' AND xid >= (SELECT until FROM sealed)
           AND NOT EXISTS (SELECT 1 FROM {schema}.done_cutoffs c
                            WHERE c.queue IN ($1, '') AND c.state = d.state
                              AND d.finished_at < c.before AND pg_visible_in_snapshot(d.xid, c.seen)))
         AS cancelled,
       extract(epoch FROM now() - LEAST(
           (SELECT min(run_at) FROM {schema}.ready WHERE queue = $1 AND run_at <= now()),
           (SELECT min(run_at) FROM {schema}.scheduled WHERE queue = $1 AND run_at <= now())
       ))::float8 AS oldest_ready_secs
