-- The enqueue bench's floor: the same no-op jobs inserted raw, one multi-row INSERT per
-- batch, with only what a row needs: the row after VALUES is repeated, comma-separated, once
-- per job. {jobs} is the validated table name. Per row: ? queue, ? payload (JSON text)
INSERT INTO {jobs} (queue, payload)
VALUES
(?, ?)
