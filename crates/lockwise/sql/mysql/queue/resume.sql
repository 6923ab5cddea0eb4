-- Resumes queue ?; one row affected when it was paused.
DELETE FROM {paused} WHERE queue = ?
