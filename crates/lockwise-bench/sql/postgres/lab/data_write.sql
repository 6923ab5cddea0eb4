-- $1 resource, $2 value, $3 the fencing token the fence has just accepted.
INSERT INTO {schema}.lab_data (resource, value, token)
VALUES ($1, $2, $3)
ON CONFLICT (resource) DO UPDATE SET value = excluded.value, token = excluded.token
