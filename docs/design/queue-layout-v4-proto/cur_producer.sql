SELECT count(*) AS depth FROM (SELECT 1 FROM cur.jobs WHERE state = 'available' AND queue = 'q' LIMIT :target) s
\gset
\if :depth < :target
INSERT INTO cur.jobs (queue, payload, priority, run_at, max_attempts) SELECT 'q', jsonb_build_object('n', g, 'pad', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'), 0, now(), 5 FROM generate_series(1, 100) g;
\else
\sleep 2 ms
\endif
