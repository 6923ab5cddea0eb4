\set ON_ERROR_STOP 1
PREPARE enq(text,jsonb,smallint,float8,int,text,float8) AS -- $1 queue, $2 payload, $3 priority, $4 delay (s), $5 max_attempts, $6 key, $7 window (s) or NULL
WITH new AS (SELECT nextval('v4.job_id') AS id),
key AS (
    INSERT INTO v4.keys (queue, key, job_id)
    SELECT $1, $6, id FROM new WHERE $6 IS NOT NULL
    ON CONFLICT (queue, key) DO UPDATE SET job_id = EXCLUDED.job_id, created_at = now()
     WHERE $7 IS NOT NULL AND keys.created_at <= now() - make_interval(secs => $7)
    RETURNING job_id
),
go AS (SELECT id FROM new WHERE $6 IS NULL OR EXISTS (SELECT 1 FROM key)),
now_ AS (
    INSERT INTO v4.ready (id, queue, payload, priority, run_at, max_attempts, idempotency_key)
    SELECT id, $1, $2, $3, now(), $5, $6 FROM go WHERE $4 <= 0
),
later AS (
    INSERT INTO v4.scheduled (id, queue, payload, priority, run_at, attempt, max_attempts,
                                    idempotency_key, created_at, errors)
    SELECT id, $1, $2, $3, now() + make_interval(secs => $4), 0, $5, $6, now(), '[]' FROM go WHERE $4 > 0
)
SELECT id, true AS inserted FROM go
UNION ALL
SELECT job_id, false FROM v4.keys
 WHERE queue = $1 AND key = $6 AND NOT EXISTS (SELECT 1 FROM go)
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE enq('q','{"a":1}',0,0,5,NULL,NULL);
PREPARE enqk(text,jsonb,smallint,float8,int,text,float8) AS -- $1 queue, $2 payload, $3 priority, $4 delay (s), $5 max_attempts, $6 key, $7 window (s) or NULL
WITH new AS (SELECT nextval('v4.job_id') AS id),
key AS (
    INSERT INTO v4.keys (queue, key, job_id)
    SELECT $1, $6, id FROM new WHERE $6 IS NOT NULL
    ON CONFLICT (queue, key) DO UPDATE SET job_id = EXCLUDED.job_id, created_at = now()
     WHERE $7 IS NOT NULL AND keys.created_at <= now() - make_interval(secs => $7)
    RETURNING job_id
),
go AS (SELECT id FROM new WHERE $6 IS NULL OR EXISTS (SELECT 1 FROM key)),
now_ AS (
    INSERT INTO v4.ready (id, queue, payload, priority, run_at, max_attempts, idempotency_key)
    SELECT id, $1, $2, $3, now(), $5, $6 FROM go WHERE $4 <= 0
),
later AS (
    INSERT INTO v4.scheduled (id, queue, payload, priority, run_at, attempt, max_attempts,
                                    idempotency_key, created_at, errors)
    SELECT id, $1, $2, $3, now() + make_interval(secs => $4), 0, $5, $6, now(), '[]' FROM go WHERE $4 > 0
)
SELECT id, true AS inserted FROM go
UNION ALL
SELECT job_id, false FROM v4.keys
 WHERE queue = $1 AND key = $6 AND NOT EXISTS (SELECT 1 FROM go)
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE enqk('q','{"a":2}',0,0,5,'k1',NULL);
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE enqk('q','{"a":3}',0,0,5,'k1',NULL);
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE enq('q','{"a":4}',0,60,5,NULL,NULL);
PREPARE bulk(text,jsonb[],smallint[],float8[],int[],text[]) AS -- $1 queue, $2 payloads jsonb[], $3 priorities smallint[], $4 delays float8[],
-- $5 max_attempts int[], $6 keys text[] (NULL entries for no key)
WITH input AS (
    SELECT nextval('v4.job_id') AS id, t.*
      FROM unnest($2::jsonb[], $3::smallint[], $4::float8[], $5::int[], $6::text[])
           WITH ORDINALITY AS t(payload, priority, delay, max_attempts, key, ord)
),
keyed AS (
    INSERT INTO v4.keys (queue, key, job_id)
    SELECT $1, key, id FROM input WHERE key IS NOT NULL
    ON CONFLICT (queue, key) DO NOTHING
    RETURNING job_id
),
go AS (SELECT * FROM input WHERE key IS NULL OR id IN (SELECT job_id FROM keyed)),
now_ AS (
    INSERT INTO v4.ready (id, queue, payload, priority, run_at, max_attempts, idempotency_key)
    SELECT id, $1, payload, priority, now(), max_attempts, key FROM go WHERE delay <= 0
),
later AS (
    INSERT INTO v4.scheduled (id, queue, payload, priority, run_at, attempt, max_attempts,
                                    idempotency_key, created_at, errors)
    SELECT id, $1, payload, priority, now() + make_interval(secs => delay), 0, max_attempts, key,
           now(), '[]' FROM go WHERE delay > 0
)
SELECT i.ord, coalesce(g.id, k.job_id) AS id, g.id IS NOT NULL AS inserted
  FROM input i
  LEFT JOIN go g ON g.id = i.id
  LEFT JOIN v4.keys k ON g.id IS NULL AND k.queue = $1 AND k.key = i.key
 ORDER BY i.ord
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE bulk('q', ARRAY['{}','{}','{}']::jsonb[], '{0,0,1}', '{0,0,30}', '{5,5,5}', ARRAY[NULL,'k1','k2']);
PREPARE claim(text,bigint,float8,text,bigint[],int[],smallint[]) AS -- $1 queue, $2 limit, $3 lease (s), $4 worker, $5 finished ids, $6 their attempts, $7 their segs
WITH acked AS (
    DELETE FROM v4.leases l
     USING unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
     WHERE l.seg = f.seg AND l.id = f.id AND l.attempt = f.attempt
    RETURNING l.*
),
archived AS (
    INSERT INTO v4.done (id, queue, state, priority, attempt, max_attempts, idempotency_key,
                               payload, worker, last_error, errors, created_at, run_at)
    SELECT id, queue, 'done', priority, attempt, max_attempts, idempotency_key,
           payload, worker, last_error, errors, created_at, run_at FROM acked
    RETURNING 1
),
next AS MATERIALIZED (
    SELECT seg, id FROM v4.ready
     WHERE queue = $1 AND run_at <= now()
     ORDER BY priority, run_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
),
moved AS (
    -- = ANY over InitPlan arrays: index probes per partition. A join (USING next) was planned
    -- as a hash join over seq scans of every segment, i.e. O(backlog) per claim.
    DELETE FROM v4.ready r
     WHERE r.seg = ANY ((SELECT array_agg(DISTINCT seg) FROM next)::smallint[])
       AND r.id  = ANY ((SELECT array_agg(id) FROM next)::bigint[])
    RETURNING r.*
),
claimed AS (
    INSERT INTO v4.leases (id, queue, priority, run_at, payload, attempt, max_attempts,
                                 idempotency_key, created_at, last_error, errors, started,
                                 lease_until, worker)
    SELECT id, queue, priority, run_at, payload, attempt + 1, max_attempts, idempotency_key,
           created_at, last_error, errors, false, now() + make_interval(secs => $3), $4
      FROM moved
    RETURNING seg, id, queue, payload, attempt, max_attempts
)
SELECT c.*, a.n AS acknowledged FROM (SELECT count(*) AS n FROM archived) a LEFT JOIN claimed c ON true
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE claim('q',10,30,'w','{}','{}','{}');
PREPARE conf(bigint[],int[],smallint[]) AS -- $1 ids, $2 attempts, $3 segs
WITH quick AS (SELECT set_config('synchronous_commit', 'off', true) AS setting)
UPDATE v4.leases l SET started = true
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS c(id, attempt, seg), quick
 WHERE l.seg = c.seg AND l.id = c.id AND l.attempt = c.attempt
RETURNING l.id
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE conf(:'ids',:'atts',:'segs');
PREPARE hb(bigint[],int[],smallint[],float8) AS -- $1 ids, $2 attempts, $3 segs, $4 lease (s)
UPDATE v4.leases l SET lease_until = now() + make_interval(secs => $4)
  FROM unnest($1::bigint[], $2::int[], $3::smallint[]) AS r(id, attempt, seg)
 WHERE l.seg = r.seg AND l.id = r.id AND l.attempt = r.attempt
RETURNING l.id
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE hb(:'ids',:'atts',:'segs',30);
PREPARE fail(bigint,int,smallint,text,float8,boolean) AS -- $1 id, $2 attempt, $3 seg, $4 error, $5 retry delay (s), $6 final
WITH gone AS (
    DELETE FROM v4.leases WHERE seg = $3 AND id = $1 AND attempt = $2 RETURNING *
),
f AS (
    SELECT g.*, ($6 OR g.attempt >= g.max_attempts) AS final,
           g.errors || jsonb_build_object('attempt', g.attempt, 'at', now(), 'error', $4) AS errs
      FROM gone g
),
retry_later AS (
    INSERT INTO v4.scheduled (id, queue, priority, run_at, payload, attempt, max_attempts,
                                    idempotency_key, created_at, last_error, errors)
    SELECT id, queue, priority, now() + make_interval(secs => $5), payload, attempt, max_attempts,
           idempotency_key, created_at, $4, errs FROM f WHERE NOT final AND $5 > 0
),
retry_now AS (
    INSERT INTO v4.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                                idempotency_key, created_at, last_error, errors)
    SELECT id, queue, priority, now(), payload, attempt, max_attempts, idempotency_key,
           created_at, $4, errs FROM f WHERE NOT final AND $5 <= 0
),
died AS (
    INSERT INTO v4.dead (id, queue, priority, attempt, max_attempts, idempotency_key,
                               payload, worker, last_error, errors, created_at, run_at)
    SELECT id, queue, priority, attempt, max_attempts, idempotency_key, payload, worker, $4, errs,
           created_at, run_at FROM f WHERE final
)
SELECT CASE WHEN final THEN 'dead' ELSE 'available' END AS state FROM f
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE fail(:minid,1,:minseg,'boom',10,false);
PREPARE failf(bigint,int,smallint,text,float8,boolean) AS -- $1 id, $2 attempt, $3 seg, $4 error, $5 retry delay (s), $6 final
WITH gone AS (
    DELETE FROM v4.leases WHERE seg = $3 AND id = $1 AND attempt = $2 RETURNING *
),
f AS (
    SELECT g.*, ($6 OR g.attempt >= g.max_attempts) AS final,
           g.errors || jsonb_build_object('attempt', g.attempt, 'at', now(), 'error', $4) AS errs
      FROM gone g
),
retry_later AS (
    INSERT INTO v4.scheduled (id, queue, priority, run_at, payload, attempt, max_attempts,
                                    idempotency_key, created_at, last_error, errors)
    SELECT id, queue, priority, now() + make_interval(secs => $5), payload, attempt, max_attempts,
           idempotency_key, created_at, $4, errs FROM f WHERE NOT final AND $5 > 0
),
retry_now AS (
    INSERT INTO v4.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                                idempotency_key, created_at, last_error, errors)
    SELECT id, queue, priority, now(), payload, attempt, max_attempts, idempotency_key,
           created_at, $4, errs FROM f WHERE NOT final AND $5 <= 0
),
died AS (
    INSERT INTO v4.dead (id, queue, priority, attempt, max_attempts, idempotency_key,
                               payload, worker, last_error, errors, created_at, run_at)
    SELECT id, queue, priority, attempt, max_attempts, idempotency_key, payload, worker, $4, errs,
           created_at, run_at FROM f WHERE final
)
SELECT CASE WHEN final THEN 'dead' ELSE 'available' END AS state FROM f
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE failf(:minid,1,:minseg,'boom',0,true);
PREPARE hand(bigint[],int[],smallint[]) AS -- $1 ids, $2 attempts, $3 segs
WITH back AS (
    DELETE FROM v4.leases l
     USING unnest($1::bigint[], $2::int[], $3::smallint[]) AS r(id, attempt, seg)
     WHERE l.seg = r.seg AND l.id = r.id AND l.attempt = r.attempt
    RETURNING l.*
)
INSERT INTO v4.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                            idempotency_key, created_at, last_error, errors)
SELECT id, queue, priority, now(), payload, attempt, max_attempts + 1, idempotency_key,
       created_at, last_error, errors FROM back
RETURNING id
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE hand(ARRAY[:minid]::bigint[],'{1}',ARRAY[:minseg]::smallint[]);
UPDATE v4.leases SET lease_until = now() - interval '1 s' WHERE id = :minid;
PREPARE reap(int) AS -- $1 advisory class. Seq scan of the lease segments (a few hundred rows).
WITH reaper AS (SELECT pg_try_advisory_xact_lock($1, hashtext('v4.reaper')) AS alone),
expired AS (
    DELETE FROM v4.leases
     WHERE lease_until < now() AND (SELECT alone FROM reaper)
    RETURNING *
),
back AS (
    INSERT INTO v4.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                                idempotency_key, created_at, last_error, errors)
    SELECT id, queue, priority, now(), payload, attempt,
           CASE WHEN started THEN max_attempts ELSE max_attempts + 1 END,
           idempotency_key, created_at,
           CASE WHEN started THEN 'lease expired (worker ' || coalesce(worker, '?') || ')'
                ELSE 'never started: the claim was not confirmed (worker ' || coalesce(worker, '?') || ')' END,
           errors || jsonb_build_object('attempt', attempt, 'at', now(), 'error',
                     CASE WHEN started THEN 'lease expired' ELSE 'never started' END)
      FROM expired WHERE NOT (started AND attempt >= max_attempts)
    RETURNING 1
),
died AS (
    INSERT INTO v4.dead (id, queue, priority, attempt, max_attempts, idempotency_key,
                               payload, worker, last_error, errors, created_at, run_at)
    SELECT id, queue, priority, attempt, max_attempts, idempotency_key, payload, worker,
           'lease expired (worker ' || coalesce(worker, '?') || ')',
           errors || jsonb_build_object('attempt', attempt, 'at', now(), 'error', 'lease expired'),
           created_at, run_at
      FROM expired WHERE started AND attempt >= max_attempts
    RETURNING 1
)
SELECT (SELECT count(*) FROM back) + (SELECT count(*) FROM died)
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE reap(1);
PREPARE promote AS WITH due AS (
    DELETE FROM v4.scheduled
     WHERE id IN (SELECT id FROM v4.scheduled WHERE run_at <= now()
                   ORDER BY run_at LIMIT 1000 FOR UPDATE SKIP LOCKED)
    RETURNING *
)
INSERT INTO v4.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                            idempotency_key, created_at, last_error, errors)
SELECT id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key, created_at,
       last_error, errors FROM due
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE promote;
PREPARE cancel(bigint) AS -- $1 id
WITH r AS (DELETE FROM v4.ready     WHERE id = $1 RETURNING id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key, created_at, last_error, errors, NULL::text AS worker),
     s AS (DELETE FROM v4.scheduled WHERE id = $1 RETURNING id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key, created_at, last_error, errors, NULL::text AS worker),
     l AS (DELETE FROM v4.leases    WHERE id = $1 RETURNING id, queue, priority, run_at, payload, attempt, max_attempts, idempotency_key, created_at, last_error, errors, worker),
     x AS (SELECT * FROM r UNION ALL SELECT * FROM s UNION ALL SELECT * FROM l)
INSERT INTO v4.done (id, queue, state, priority, attempt, max_attempts, idempotency_key,
                           payload, worker, last_error, errors, created_at, run_at)
SELECT id, queue, 'cancelled', priority, attempt, max_attempts, idempotency_key, payload, worker,
       last_error, errors, created_at, run_at FROM x
RETURNING id
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE cancel(:rid);
PREPARE retry(bigint) AS WITH d AS (DELETE FROM v4.dead WHERE id = $1 RETURNING *)
INSERT INTO v4.ready (id, queue, priority, run_at, payload, attempt, max_attempts,
                            idempotency_key, created_at, last_error, errors)
SELECT id, queue, priority, now(), payload, attempt, attempt + max_attempts, idempotency_key,
       created_at, last_error, errors FROM d
RETURNING id
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE retry(:did);
PREPARE claim2(text,bigint,float8,text,bigint[],int[],smallint[]) AS -- $1 queue, $2 limit, $3 lease (s), $4 worker, $5 finished ids, $6 their attempts, $7 their segs
WITH acked AS (
    DELETE FROM v4.leases l
     USING unnest($5::bigint[], $6::int[], $7::smallint[]) AS f(id, attempt, seg)
     WHERE l.seg = f.seg AND l.id = f.id AND l.attempt = f.attempt
    RETURNING l.*
),
archived AS (
    INSERT INTO v4.done (id, queue, state, priority, attempt, max_attempts, idempotency_key,
                               payload, worker, last_error, errors, created_at, run_at)
    SELECT id, queue, 'done', priority, attempt, max_attempts, idempotency_key,
           payload, worker, last_error, errors, created_at, run_at FROM acked
    RETURNING 1
),
next AS MATERIALIZED (
    SELECT seg, id FROM v4.ready
     WHERE queue = $1 AND run_at <= now()
     ORDER BY priority, run_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
),
moved AS (
    -- = ANY over InitPlan arrays: index probes per partition. A join (USING next) was planned
    -- as a hash join over seq scans of every segment, i.e. O(backlog) per claim.
    DELETE FROM v4.ready r
     WHERE r.seg = ANY ((SELECT array_agg(DISTINCT seg) FROM next)::smallint[])
       AND r.id  = ANY ((SELECT array_agg(id) FROM next)::bigint[])
    RETURNING r.*
),
claimed AS (
    INSERT INTO v4.leases (id, queue, priority, run_at, payload, attempt, max_attempts,
                                 idempotency_key, created_at, last_error, errors, started,
                                 lease_until, worker)
    SELECT id, queue, priority, run_at, payload, attempt + 1, max_attempts, idempotency_key,
           created_at, last_error, errors, false, now() + make_interval(secs => $3), $4
      FROM moved
    RETURNING seg, id, queue, payload, attempt, max_attempts
)
SELECT c.*, a.n AS acknowledged FROM (SELECT count(*) AS n FROM archived) a LEFT JOIN claimed c ON true
;
EXECUTE claim('q',10,30,'w','{}','{}','{}');
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE claim2('q',10,30,'w',:'ids',:'atts',:'segs');
PREPARE stats(text,smallint) AS -- $1 queue; $2 the current done slot ((epoch / P) % N, computed in Rust)
SELECT (SELECT count(*) FROM v4.ready     WHERE queue = $1 AND run_at <= now()) AS ready,
       (SELECT count(*) FROM v4.ready     WHERE queue = $1 AND run_at >  now())
     + (SELECT count(*) FROM v4.scheduled WHERE queue = $1)                   AS scheduled,
       (SELECT count(*) FROM v4.leases    WHERE queue = $1)                   AS running,
       (SELECT coalesce(sum(n), 0) FROM v4.done_counts WHERE queue = $1 AND state = 'done')
     + (SELECT count(*) FROM v4.done WHERE seg = $2 AND queue = $1 AND state = 'done') AS done,
       (SELECT count(*) FROM v4.dead      WHERE queue = $1)                   AS dead,
       (SELECT coalesce(sum(n), 0) FROM v4.done_counts WHERE queue = $1 AND state = 'cancelled')
     + (SELECT count(*) FROM v4.done WHERE seg = $2 AND queue = $1 AND state = 'cancelled') AS cancelled
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE stats('q',((extract(epoch FROM now())::bigint / 14400) % 8)::smallint);
PREPARE job(bigint) AS -- job(id): one row, whatever the state
SELECT 'ready' AS stored, id, queue, priority, attempt, max_attempts, idempotency_key, payload,
       NULL::text AS worker, last_error, errors, created_at, run_at,
       NULL::timestamptz AS finished_at, NULL::timestamptz AS lease_until
  FROM v4.ready WHERE id = $1
UNION ALL SELECT 'scheduled', id, queue, priority, attempt, max_attempts, idempotency_key, payload,
       NULL, last_error, errors, created_at, run_at, NULL, NULL FROM v4.scheduled WHERE id = $1
UNION ALL SELECT 'running', id, queue, priority, attempt, max_attempts, idempotency_key, payload,
       worker, last_error, errors, created_at, run_at, NULL, lease_until FROM v4.leases WHERE id = $1
UNION ALL SELECT state, id, queue, priority, attempt, max_attempts, idempotency_key, payload,
       worker, last_error, errors, created_at, run_at, finished_at, NULL FROM v4.done WHERE id = $1
UNION ALL SELECT 'dead', id, queue, priority, attempt, max_attempts, idempotency_key, payload,
       worker, last_error, errors, created_at, run_at, finished_at, NULL FROM v4.dead WHERE id = $1
LIMIT 1
;
SELECT array_agg(id)::text AS ids, array_agg(attempt)::text AS atts, array_agg(seg)::text AS segs, min(id) AS minid, (array_agg(seg ORDER BY id))[1] AS minseg, (SELECT min(id) FROM v4.ready) AS rid, (SELECT min(id) FROM v4.dead) AS did, (SELECT min(id) FROM v4.done) AS doneid FROM v4.leases \gset
EXECUTE job(:doneid);
SELECT 'ready', count(*) FROM v4.ready UNION ALL SELECT 'sched', count(*) FROM v4.scheduled UNION ALL SELECT 'leases', count(*) FROM v4.leases UNION ALL SELECT 'done', count(*) FROM v4.done UNION ALL SELECT 'dead', count(*) FROM v4.dead UNION ALL SELECT 'keys', count(*) FROM v4.keys;
