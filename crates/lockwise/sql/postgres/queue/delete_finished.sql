-- Deletes one queue's jobs in a finished state ('done', 'dead' or 'cancelled') that finished
-- more than $3 seconds ago, with the idempotency keys they still hold, and takes the sealed
-- ones out of done_counts. Runs in a transaction after prune_lock.sql.
-- $1 queue, $2 state, $3 age (seconds). {of_queue} is `queue = $1` for one queue, so that
-- the scans use done_recent and dead_queue even with a generic plan (`$1 IS NULL OR queue =
-- $1` could not), or `$1::text IS NULL` for every queue in the schema ($1 then NULL).
WITH history AS (
    DELETE FROM {schema}.done
     WHERE {of_queue} AND state = $2
       AND finished_at < now() - make_interval(secs => $3)
    RETURNING id, queue, state, idempotency_key, finished_at, xid
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
    SELECT queue, state, to_timestamp(floor(extract(epoch FROM finished_at) / 10) * 10) AS bucket,
           count(*) AS n
      FROM history
     WHERE xid < (SELECT until FROM {schema}.done_sealed)
     GROUP BY 1, 2, 3
),
emptied AS (
    DELETE FROM {schema}.done_counts c USING sealed x
     WHERE c.queue = x.queue AND c.state = x.state AND c.bucket = x.bucket AND c.n = x.n
),
lowered AS (
    UPDATE {schema}.done_counts c SET n = c.n - x.n
      FROM sealed x
     WHERE c.queue = x.queue AND c.state = x.state AND c.bucket = x.bucket AND c.n <> x.n
)
SELECT count(*) AS deleted FROM gone
