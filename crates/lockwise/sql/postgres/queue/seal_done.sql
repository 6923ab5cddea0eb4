-- Seals the finished history up to the last whole 10-second bucket that ended at least 10
-- seconds ago: adds its counts to done_counts, so that stats.sql counts only the newest jobs.
-- Run by the maintenance (any process; a concurrent sealer waits on done_sealed's row and
-- then finds nothing to seal). A job finished by a statement older than the margin would be
-- missed: statements that finish jobs are short. No parameters.
WITH upto AS (
    SELECT to_timestamp(floor(extract(epoch FROM now()) / 10) * 10 - 10) AS t
),
was AS (SELECT until FROM {schema}.done_sealed),
moved AS (
    UPDATE {schema}.done_sealed SET until = (SELECT t FROM upto)
     WHERE until < (SELECT t FROM upto)
    RETURNING until
)
INSERT INTO {schema}.done_counts (queue, state, bucket, n)
SELECT queue, state, to_timestamp(floor(extract(epoch FROM finished_at) / 10) * 10), count(*)
  FROM {schema}.done
 WHERE EXISTS (SELECT 1 FROM moved)
   AND finished_at >= (SELECT until FROM was) AND finished_at < (SELECT t FROM upto)
 GROUP BY 1, 2, 3
ON CONFLICT (queue, state, bucket) DO UPDATE SET n = done_counts.n + EXCLUDED.n
