SELECT count(*) AS depth FROM (SELECT 1 FROM ring.ready WHERE queue = 'q' LIMIT :target) s
\gset
\if :depth < :target
INSERT INTO ring.ready (id, queue, payload, priority, run_at, max_attempts) SELECT nextval('ring.job_id'), 'q', jsonb_build_object('n', g, 'pad', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'), 0, now(), 5 FROM generate_series(1, 100) g;
\else
\sleep 2 ms
\endif
