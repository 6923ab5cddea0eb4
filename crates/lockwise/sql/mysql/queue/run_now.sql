-- Makes job ? due now if it waits for a later time (delayed, or waiting to retry). ? id
UPDATE {jobs} SET run_at = NOW(6) WHERE id = ? AND state = 'available' AND run_at > NOW(6)
