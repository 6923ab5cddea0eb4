-- Locks schedule ? for one tick, until the tick's transaction ends (a racing scheduler waits,
-- then reads the period this one recorded): its newest period, and the server's clock in
-- microseconds since the Unix epoch.
SELECT last_period, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED) AS now_micros
  FROM {periodic} WHERE name = ? FOR UPDATE
