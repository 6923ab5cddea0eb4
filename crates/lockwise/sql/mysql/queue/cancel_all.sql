-- Cancels the unfinished jobs of queue ? in the states asked, as cancel.sql does one job:
-- ? ready (due now), ? scheduled (due later), ? running.
UPDATE {jobs} SET state = 'cancelled', finished_at = NOW(6), lease_until = NULL
 WHERE queue = ?
   AND ((state = 'available' AND ((? AND run_at <= NOW(6)) OR (? AND run_at > NOW(6))))
        OR (state = 'running' AND ?))
