-- A running worker's row, created or refreshed; rows of workers dead for an hour go.
-- $1 id, $2 host, $3 pid, $4 queues, $5 concurrency, $6 jobs running, $7 lease (seconds)
WITH gone AS (
    DELETE FROM {schema}.workers WHERE expires_at < now() - interval '1 hour'
)
INSERT INTO {schema}.workers (id, host, pid, queues, concurrency, running, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))
ON CONFLICT (id) DO UPDATE
   SET running = EXCLUDED.running, seen_at = now(), expires_at = EXCLUDED.expires_at
