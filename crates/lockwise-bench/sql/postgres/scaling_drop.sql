-- Removes the bench's schema. {schema} is the quoted, validated schema name.
DROP SCHEMA IF EXISTS {schema} CASCADE
