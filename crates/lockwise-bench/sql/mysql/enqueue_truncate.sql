-- Empties the enqueue bench's jobs table between runs. {jobs} is the validated table name.
TRUNCATE TABLE {jobs}
