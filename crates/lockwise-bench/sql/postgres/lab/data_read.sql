-- $1 resource: its value and the token that wrote it.
SELECT value, token FROM {schema}.lab_data WHERE resource = $1
