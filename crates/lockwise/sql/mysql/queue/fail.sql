-- Records a failed attempt: back to available after a backoff, or dead when the attempts are
-- used up (or the failure is final). Compare-and-set on (id, attempt, running). MySQL assigns
-- left to right, so only columns not changed before are read.
-- ? error, ? error, ? final, ? retry delay (µs), ? final, ? final, ? id, ? attempt
UPDATE {jobs} SET
       errors = JSON_ARRAY_APPEND(COALESCE(errors, '[]'), '$',
         JSON_OBJECT('attempt', attempt, 'at', NOW(6), 'error', ?)),
       last_error = ?,
       run_at = IF(? OR attempt >= max_attempts, run_at, NOW(6) + INTERVAL ? MICROSECOND),
       finished_at = IF(? OR attempt >= max_attempts, NOW(6), NULL),
       lease_until = NULL,
       state = IF(? OR attempt >= max_attempts, 'dead', 'available')
 WHERE id = ? AND attempt = ? AND state = 'running'
