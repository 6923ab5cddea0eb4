-- A worker that stops removes its row. ? id
DELETE FROM {workers} WHERE id = ?
