-- Locks schedule $1 for one tick, until the tick's transaction ends (a racing scheduler waits,
-- then reads the period this one recorded): its newest period, and the database's clock in
-- microseconds since the Unix epoch.
SELECT last_period, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now_micros
  FROM {schema}.periodic WHERE name = $1 FOR UPDATE
