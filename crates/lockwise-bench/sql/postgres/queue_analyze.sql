-- Fresh statistics for the bench's freshly filled queue tables, so that both sides are
-- planned for the backlog they drain (without them the naive floor's `WHERE id IN (SELECT …
-- LIMIT n)` can get a plan that rescans the whole backlog for every claim).
-- {schema} is the quoted, validated schema name of the bench's own queue store.
ANALYZE {schema}.ready, {schema}.floor_jobs
