-- Makes job $1 due now if it waits for a later time (delayed, or waiting to retry): its
-- run_at becomes now, where it is (scheduled, or a delayed job in ready). `moved` is 1, or 0
-- when it is not a job due later.
WITH s AS (
    UPDATE {schema}.scheduled SET run_at = now() WHERE id = $1 AND run_at > now() RETURNING id
),
r AS (
    UPDATE {schema}.ready SET run_at = now() WHERE id = $1 AND run_at > now() RETURNING id
)
SELECT count(*) AS moved FROM (SELECT id FROM s UNION ALL SELECT id FROM r) x
