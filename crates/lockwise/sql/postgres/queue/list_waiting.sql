-- One queue's jobs waiting to run, in the order they will, ready ($2 true: due now) or
-- scheduled ($2 false: due later), in the columns of job_select.sql. Read from ready and
-- scheduled alone, in the claim index's order (ready_claim), so that a page stops after its
-- rows: the view all_jobs would sort every job of the queue first.
-- $1 queue, $2 ready, $3 limit, $4 offset
SELECT id, queue, CASE WHEN $2 THEN 'ready' ELSE 'scheduled' END AS state, priority, attempt,
       max_attempts, idempotency_key, payload, NULL::text AS worker, last_error, errors,
       (extract(epoch FROM created_at) * 1000000)::bigint AS created_us,
       (extract(epoch FROM run_at) * 1000000)::bigint AS run_us,
       NULL::bigint AS finished_us,
       NULL::bigint AS lease_us
  FROM ((SELECT id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key,
                created_at, last_error, errors
           FROM {schema}.ready
          WHERE queue = $1 AND (run_at <= now()) = $2
          ORDER BY priority, run_at, id LIMIT $3 + $4)
        UNION ALL
        (SELECT id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key,
                created_at, last_error, errors
           FROM {schema}.scheduled
          WHERE queue = $1 AND (run_at <= now()) = $2
          ORDER BY priority, run_at, id LIMIT $3 + $4)) w
 ORDER BY priority, run_at, id LIMIT $3 OFFSET $4
