-- The rows of a bench table, exact. {jobs} is the validated table name.
SELECT COUNT(*) FROM {jobs}
