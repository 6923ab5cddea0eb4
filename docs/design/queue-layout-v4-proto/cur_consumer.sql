WITH done AS (UPDATE cur.jobs j SET state = 'done', finished_at = now(), lease_until = NULL FROM unnest(:ids::bigint[], :atts::int[]) AS f(id, attempt) WHERE j.id = f.id AND j.attempt = f.attempt AND j.state = 'running' RETURNING j.id), next AS MATERIALIZED (SELECT id FROM cur.jobs WHERE state = 'available' AND queue = 'q' AND run_at <= now() ORDER BY priority, run_at, id LIMIT 10 FOR UPDATE SKIP LOCKED), claimed AS (UPDATE cur.jobs j SET state = 'running', attempt = j.attempt + 1, started = false, lease_until = now() + make_interval(secs => 30), worker = 'w' FROM next WHERE j.id = next.id RETURNING j.id, j.queue, j.payload, j.attempt, j.max_attempts) SELECT coalesce(array_agg(id), '{}')::text AS ids, coalesce(array_agg(attempt), '{}')::text AS atts, count(*) AS n, (SELECT count(*) FROM done) AS acked FROM claimed
\gset
\if :n > 0
WITH quick AS (SELECT set_config('synchronous_commit', 'off', true) AS setting) UPDATE cur.jobs j SET started = true FROM unnest(:ids::bigint[], :atts::int[]) AS c(id, attempt), quick WHERE j.id = c.id AND j.attempt = c.attempt AND j.state = 'running';
\sleep 1 ms
\else
\sleep 5 ms
\endif
