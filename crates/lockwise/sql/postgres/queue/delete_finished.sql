-- Prunes one queue's jobs in a finished state ('done', 'dead' or 'cancelled') that finished
-- more than $3 seconds ago; returns how many. Done and cancelled jobs are pruned by moving
-- the queue's cutoff (done_cutoffs, v11.sql): they are gone for every reader at once, and
-- leave the disk when retire_history truncates their segment, never by DELETE. Dead letters,
-- written at the rate of final failures, are deleted. The idempotency keys the pruned jobs
-- hold are freed, and the sealed ones among them taken out of done_counts. Runs in a
-- transaction after prune_lock.sql, so that no sealer nor other pruner runs beside it.
-- $1 queue, $2 state, $3 age (seconds). {of_queue} is `queue = $1` for one queue, so that the
-- scans use done_recent and dead_queue even with a generic plan (`$1 IS NULL OR queue = $1`
-- could not), or `$1::text IS NULL` for every queue in the schema ($1 then NULL, and the
-- cutoff set is queue '').
--
-- The jobs it prunes are those the new cutoff covers and the old ones did not. The new cutoff
-- keeps this statement's snapshot and covers only the jobs it sees, so each job is counted,
-- unkeyed and unsealed by exactly the pruner that prunes it (pruners run one at a time:
-- prune_lock.sql). A job the old cutoff did not cover finished after its time, or in a
-- transaction its snapshot did not see, whose id is then at least that snapshot's xmin: the
-- two ranges the scan reads through done_recent and done_xid.
WITH cut AS (
    SELECT now() - make_interval(secs => $3) AS before, pg_current_snapshot() AS seen
),
own AS (
    SELECT coalesce(c.before, '-infinity') AS before,
           coalesce(pg_snapshot_xmin(c.seen), '0') AS xmin
      FROM (VALUES (1)) one
      LEFT JOIN {schema}.done_cutoffs c ON c.queue = coalesce($1, '') AND c.state = $2
),
history AS MATERIALIZED (
    SELECT d.id, d.queue, d.state, d.idempotency_key, d.finished_at, d.xid, d.seg
      FROM {schema}.done d, cut, own
     WHERE {of_queue} AND d.state = $2
       AND d.finished_at < cut.before AND pg_visible_in_snapshot(d.xid, cut.seen)
       AND (d.finished_at >= own.before OR d.xid >= own.xmin)
       AND NOT EXISTS (SELECT 1 FROM {schema}.done_cutoffs c
                        WHERE c.queue IN (d.queue, '') AND c.state = d.state
                          AND d.finished_at < c.before AND pg_visible_in_snapshot(d.xid, c.seen))
),
moved AS (
    INSERT INTO {schema}.done_cutoffs (queue, state, before, seen)
    SELECT coalesce($1, ''), $2, cut.before, cut.seen FROM cut
     WHERE $2 IN ('done', 'cancelled')
    ON CONFLICT (queue, state) DO UPDATE
       SET before = greatest(done_cutoffs.before, EXCLUDED.before), seen = EXCLUDED.seen
),
letters AS (
    DELETE FROM {schema}.dead
     WHERE {of_queue} AND $2 = 'dead'
       AND finished_at < now() - make_interval(secs => $3)
    RETURNING id, queue, idempotency_key
),
gone AS (
    SELECT id, queue, idempotency_key FROM history
    UNION ALL SELECT id, queue, idempotency_key FROM letters
),
freed AS (
    DELETE FROM {schema}.keys k USING gone g
     WHERE k.queue = g.queue AND k.key = g.idempotency_key AND k.job_id = g.id
),
sealed AS MATERIALIZED (
    SELECT queue, state, seg,
           to_timestamp(floor(extract(epoch FROM finished_at) / 10) * 10) AS bucket,
           count(*) AS n
      FROM history
     WHERE xid < (SELECT until FROM {schema}.done_sealed)
     GROUP BY 1, 2, 3, 4
),
emptied AS (
    DELETE FROM {schema}.done_counts c USING sealed x
     WHERE c.queue = x.queue AND c.state = x.state AND c.seg = x.seg AND c.bucket = x.bucket
       AND c.n = x.n
),
lowered AS (
    UPDATE {schema}.done_counts c SET n = c.n - x.n
      FROM sealed x
     WHERE c.queue = x.queue AND c.state = x.state AND c.seg = x.seg AND c.bucket = x.bucket
       AND c.n <> x.n
)
SELECT count(*) AS deleted FROM gone
