WITH acked AS (DELETE FROM mv.leases l USING unnest(:ids::bigint[], :atts::int[]) AS f(id, attempt) WHERE l.id = f.id AND l.attempt = f.attempt RETURNING l.*), archived AS (INSERT INTO mv.done (id, queue, state, priority, attempt, max_attempts, idempotency_key, payload, worker, last_error, errors, created_at, run_at) SELECT id, queue, 'done', priority, attempt, max_attempts, idempotency_key, payload, worker, last_error, errors, created_at, run_at FROM acked RETURNING 1), next AS MATERIALIZED (SELECT seg, id FROM mv.ready WHERE queue = 'q' AND run_at <= now() ORDER BY priority, run_at, id LIMIT 10 FOR UPDATE SKIP LOCKED), moved AS (DELETE FROM mv.ready r USING next WHERE r.seg = next.seg AND r.id = next.id RETURNING r.*), claimed AS (INSERT INTO mv.leases (id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key, created_at, last_error, errors, started, lease_until, worker) SELECT id, queue, priority, run_at, payload, attempt + 1, max_attempts, idempotency_key, created_at, last_error, errors, false, now() + make_interval(secs => 30), 'w' FROM moved RETURNING id, queue, payload, attempt, max_attempts) SELECT coalesce(array_agg(id), '{}')::text AS ids, coalesce(array_agg(attempt), '{}')::text AS atts, count(*) AS n, (SELECT count(*) FROM archived) AS acked FROM claimed
\gset
\if :n > 0
WITH quick AS (SELECT set_config('synchronous_commit', 'off', true) AS setting) UPDATE mv.leases l SET started = true FROM unnest(:ids::bigint[], :atts::int[]) AS c(id, attempt), quick WHERE l.id = c.id AND l.attempt = c.attempt;
\sleep 1 ms
\else
\sleep 5 ms
\endif
