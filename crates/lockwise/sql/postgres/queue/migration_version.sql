-- The newest applied queue migration (NULL when none). No parameters.
SELECT max(version) FROM {schema}.queue_migrations
