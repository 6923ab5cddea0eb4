-- Deletes dead letter $1 and frees its idempotency key; `deleted` is 1, or 0 when $1 is not a
-- dead letter (anymore).
WITH letter AS (
    DELETE FROM {schema}.dead WHERE id = $1 RETURNING id, queue, idempotency_key
),
freed AS (
    DELETE FROM {schema}.keys k USING letter l
     WHERE k.queue = l.queue AND k.key = l.idempotency_key AND k.job_id = l.id
)
SELECT count(*) AS deleted FROM letter
