-- Seals the finished history's counts: adds to done_counts, by 10-second bucket of
-- finished_at, the jobs finished by transactions from done_sealed.until up to the oldest
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
INSERT INTO {schema}.done_counts (queue, state, bucket, n)
SELECT queue, state, to_timestamp(floor(extract(epoch FROM finished_at) / 10) * 10), count(*)
  FROM {schema}.done
 WHERE EXISTS (SELECT 1 FROM moved)
   AND xid >= (SELECT until FROM was) AND xid < (SELECT x FROM upto)
 GROUP BY 1, 2, 3
ON CONFLICT (queue, state, bucket) DO UPDATE SET n = done_counts.n + EXCLUDED.n
