-- Records period ? (a Unix second) as the newest of schedule ?, now of queue ?.
UPDATE {periodic} SET last_period = ?, queue = ?, updated_at = NOW(6) WHERE name = ?
