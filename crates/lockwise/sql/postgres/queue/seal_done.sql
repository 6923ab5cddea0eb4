-- Seals the finished history's counts: adds to done_counts, by segment and 10-second bucket
-- of finished_at, the jobs not pruned (done_cutoffs, v11.sql) that transactions from
-- done_sealed.until finished, up to the oldest
-- transaction still running (every one below it has ended, so none of its rows can still
-- appear), and moves until there. stats.sql then counts only the jobs finished since.
-- Runs in a transaction after seal_lock.sql, so that this statement's snapshot comes after
-- any earlier sealer's or pruner's commit. No parameters.
WITH upto AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS x),
was AS (SELECT until FROM {schema}.done_sealed),
moved AS (
    UPDATE {schema}.done_sealed SET until = (SELECT x FROM upto)
     WHERE until < (SELECT x FROM upto)
    RETURNING until
)
INSERT INTO {schema}.done_counts (queue, state, seg, bucket, n)
SELECT queue, state, seg, to_timestamp(floor(extract(epoch FROM finished_at) / 10) * 10),
       count(*)
  FROM {schema}.done d
 WHERE EXISTS (SELECT 1 FROM moved)
   AND xid >= (SELECT until FROM was) AND xid < (SELECT x FROM upto)
   AND NOT EXISTS (SELECT 1 FROM {schema}.done_cutoffs c
                    WHERE c.queue IN (d.queue, '') AND c.state = d.state
                      AND d.finished_at < c.before AND pg_visible_in_snapshot(d.xid, c.seen))
 GROUP BY 1, 2, 3, 4
ON CONFLICT (queue, state, seg, bucket) DO UPDATE SET n = done_counts.n + EXCLUDED.n
