-- $1 job id, $2 worker. Idempotent: a unique key, not a lock, makes the effect happen once.
INSERT INTO {schema}.lab_effects (job_id, worker)
VALUES ($1, $2)
ON CONFLICT (job_id) DO NOTHING
