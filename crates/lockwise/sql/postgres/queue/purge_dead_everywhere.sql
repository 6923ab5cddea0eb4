-- Deletes the dead letters of every queue in the schema that died more than $1 seconds ago.
DELETE FROM {schema}.jobs WHERE state = 'dead'
   AND finished_at < now() - make_interval(secs => $1)
