-- Marks the claimed jobs running. {jobs} is the validated table name, {ids} one `?` per id.
UPDATE {jobs} SET state = 'running' WHERE id IN ({ids})
