-- Rows of workers dead for an hour go.
DELETE FROM {workers} WHERE expires_at < NOW(6) - INTERVAL 1 HOUR
