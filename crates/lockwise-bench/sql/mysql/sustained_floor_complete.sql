-- Marks finished jobs done. {jobs} is the validated table name, {ids} one `?` per id.
UPDATE {jobs} SET state = 'done', finished_at = NOW(6) WHERE id IN ({ids})
