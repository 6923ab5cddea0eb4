-- How far apart the auto-increment ids of one multi-row INSERT are (1 unless the server is
-- set up otherwise, as Galera does). No parameters.
SELECT CAST(@@auto_increment_increment AS SIGNED)
