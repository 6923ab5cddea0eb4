-- Makes the session's next transaction READ COMMITTED: under REPEATABLE READ the claim's
-- next-key locks would block concurrent enqueues. No parameters.
SET TRANSACTION ISOLATION LEVEL READ COMMITTED
