-- Job counts of one queue by state; the counts do not overlap (`ready` is due now,
-- `scheduled` due later: delayed, or waiting to retry). Never scans the finished history:
-- done and cancelled jobs are the sealed counts plus the jobs finished since (seal_done.sql).
-- $1 queue
WITH sealed AS (SELECT until FROM {schema}.done_sealed)
SELECT (SELECT count(*) FROM {schema}.ready WHERE queue = $1 AND run_at <= now())
     + (SELECT count(*) FROM {schema}.scheduled WHERE queue = $1 AND run_at <= now())
         AS ready,
       (SELECT count(*) FROM {schema}.ready WHERE queue = $1 AND run_at > now())
     + (SELECT count(*) FROM {schema}.scheduled WHERE queue = $1 AND run_at > now())
         AS scheduled,
       (SELECT count(*) FROM {schema}.leases WHERE queue = $1) AS running,
       (SELECT coalesce(sum(n), 0) FROM {schema}.done_counts
         WHERE queue = $1 AND state = 'done')::bigint
     + (SELECT count(*) FROM {schema}.done
         WHERE queue = $1 AND state = 'done' AND xid >= (SELECT until FROM sealed))
         AS done,
       (SELECT count(*) FROM {schema}.dead WHERE queue = $1) AS dead,
       (SELECT coalesce(sum(n), 0) FROM {schema}.done_counts
         WHERE queue = $1 AND state = 'cancelled')::bigint
     + (SELECT count(*) FROM {schema}.done
         WHERE queue = $1 AND state = 'cancelled' AND xid >= (SELECT until FROM sealed))
         AS cancelled
