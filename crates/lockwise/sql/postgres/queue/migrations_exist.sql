-- Whether the schema's table of applied queue migrations exists; reads the catalog only, so
-- it needs no privilege on the schema and creates nothing.
-- $1 the table's quoted, schema-qualified name
SELECT to_regclass($1) IS NOT NULL
