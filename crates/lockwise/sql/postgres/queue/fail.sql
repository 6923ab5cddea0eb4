-- Records a failed attempt: back to available after a backoff, or dead when the attempts are
-- used up (or $5 says the failure is final). Compare-and-set on (id, attempt, running): a worker
-- whose job was rescued and claimed again cannot fail it late.
-- $1 id, $2 attempt, $3 error, $4 retry delay (seconds), $5 final
UPDATE {schema}.jobs
   SET state = CASE WHEN $5 OR attempt >= max_attempts THEN 'dead' ELSE 'available' END,
       run_at = CASE WHEN $5 OR attempt >= max_attempts THEN run_at
                     ELSE now() + make_interval(secs => $4) END,
       finished_at = CASE WHEN $5 OR attempt >= max_attempts THEN now() END,
       lease_until = NULL,
       last_error = $3,
       errors = errors || jsonb_build_object('attempt', attempt, 'at', now(), 'error', $3)
 WHERE id = $1 AND attempt = $2 AND state = 'running'
RETURNING state
