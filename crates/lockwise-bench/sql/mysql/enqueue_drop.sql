-- Removes the enqueue bench's jobs table. {jobs} is the validated table name.
DROP TABLE IF EXISTS {jobs}
