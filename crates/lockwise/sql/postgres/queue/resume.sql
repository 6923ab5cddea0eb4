-- Resumes queue $1; `changed` is 1 when it was paused.
WITH r AS (DELETE FROM {schema}.paused WHERE queue = $1 RETURNING 1)
SELECT count(*) AS changed FROM r
