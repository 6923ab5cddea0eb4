-- Empties the bench's lockwise store and the floor's table (and resets their dead-tuple
-- counts).
TRUNCATE {schema}.ready, {schema}.scheduled, {schema}.leases, {schema}.done,
         {schema}.done_counts, {schema}.floor_jobs
