-- Sends a cancelled job back to ready now, with a fresh budget of max_attempts attempts (as
-- retry.sql does a dead one): its row leaves the finished history, and its sealed count with
-- it. A pruned job is gone and stays so. Runs in a transaction after prune_lock.sql, so that
-- no sealer or pruner counts beside it. `moved` is 1, or 0 when it is not a cancelled job.
-- $1 id
WITH sealed AS (SELECT until FROM {schema}.done_sealed),
d AS (
    DELETE FROM {schema}.done AS d
     WHERE id = $1 AND state = 'cancelled'
       AND NOT EXISTS (SELECT 1 FROM {schema}.done_cutoffs c
                        WHERE c.queue IN (d.queue, '') AND c.state = d.state
                          AND d.finished_at < c.before AND pg_visible_in_snapshot(d.xid, c.seen))
    RETURNING *
),
uncounted AS (
    UPDATE {schema}.done_counts c SET n = c.n - 1
      FROM d
     WHERE d.xid < (SELECT until FROM sealed)
       AND c.queue = d.queue AND c.state = 'cancelled' AND c.seg = d.seg
       AND c.bucket = to_timestamp(floor(extract(epoch FROM d.finished_at) / 10) * 10)
),
moved AS (
    INSERT INTO {schema}.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                                idempotency_key, created_at, last_error, errors)
    SELECT id, queue, priority, now(), payload, attempt, attempt + max_attempts,
           idempotency_key, created_at, last_error, errors
      FROM d
    RETURNING 1
)
SELECT count(*) AS moved FROM moved
