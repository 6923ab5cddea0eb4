-- Deletes dead letter ? (its idempotency key goes with the row). ? id
DELETE FROM {jobs} WHERE id = ? AND state = 'dead'
