-- The jobs that hold some idempotency keys, before enqueue_many.sql inserts the others: a
-- locking read, so it sees the newest committed rows (under READ COMMITTED it takes no gap
-- locks for the keys nobody holds). {jobs} is the validated table name; {keys} one ? per
-- key. ? queue, then the keys
SELECT CAST(id AS SIGNED) AS id, idempotency_key FROM {jobs}
 WHERE queue = ? AND idempotency_key IN ({keys})
 LOCK IN SHARE MODE
