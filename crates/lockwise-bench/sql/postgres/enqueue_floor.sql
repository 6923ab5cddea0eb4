-- The enqueue bench's floor: the same no-op jobs inserted raw into the floor's table, one
-- statement per batch, with only what a row needs (the columns' defaults do the rest).
-- {schema} is the quoted, validated schema name. $1 queue, $2 payloads (text, JSON)
INSERT INTO {schema}.floor_jobs (queue, payload)
SELECT $1, p::jsonb FROM unnest($2::text[]) AS p
