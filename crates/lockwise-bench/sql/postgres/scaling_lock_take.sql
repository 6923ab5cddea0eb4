-- ... then marked running, still under the lock. $1 job id, $2 worker
UPDATE {schema}.jobs SET state = 'running', worker = $2, started_at = now() WHERE id = $1
