-- Whether the table of applied queue migrations exists: a read that needs no privilege, so
-- that a queue already migrated opens without DDL (a user without CREATE can use it).
-- No parameters.
SELECT to_regclass('{schema}.queue_migrations') IS NOT NULL
