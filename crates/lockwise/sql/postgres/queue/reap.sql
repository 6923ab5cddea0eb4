-- Rescues jobs whose lease expired (their worker died or froze): back to available with the
-- attempt counted, or dead when the attempts are used up. The WHERE is re-checked on each
-- locked row, so a job that finished meanwhile is never overwritten.
UPDATE {schema}.jobs
   SET state = CASE WHEN attempt >= max_attempts THEN 'dead' ELSE 'available' END,
       finished_at = CASE WHEN attempt >= max_attempts THEN now() END,
       run_at = now(),
       lease_until = NULL,
       last_error = 'lease expired (worker ' || coalesce(worker, '?') || ')',
       errors = errors || jsonb_build_object('attempt', attempt, 'at', now(),
                                             'error', 'lease expired')
 WHERE state = 'running' AND lease_until < now()
RETURNING id, state
