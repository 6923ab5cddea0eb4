-- Rescues jobs whose lease expired: back to available with the attempt counted, or dead when
-- the attempts are used up. Assigned left to right like fail.sql. No parameters.
UPDATE {jobs} SET
       errors = JSON_ARRAY_APPEND(COALESCE(errors, '[]'), '$',
         JSON_OBJECT('attempt', attempt, 'at', NOW(6), 'error', 'lease expired')),
       last_error = CONCAT('lease expired (worker ', COALESCE(worker, '?'), ')'),
       finished_at = IF(attempt >= max_attempts, NOW(6), NULL),
       run_at = NOW(6), lease_until = NULL,
       state = IF(attempt >= max_attempts, 'dead', 'available')
 WHERE state = 'running' AND lease_until < NOW(6)
