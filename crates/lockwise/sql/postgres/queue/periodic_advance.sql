-- Records period $2 (a Unix second) as the newest of schedule $1, now of queue $3.
UPDATE {schema}.periodic SET last_period = $2, queue = $3, updated_at = now() WHERE name = $1
