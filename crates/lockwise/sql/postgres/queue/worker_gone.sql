-- A worker that stops removes its row. $1 id
DELETE FROM {schema}.workers WHERE id = $1
