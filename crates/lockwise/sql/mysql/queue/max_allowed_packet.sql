-- The largest packet (statement) the server accepts, in bytes; it closes the connection of
-- a client that sends a larger one.
SELECT CAST(@@max_allowed_packet AS UNSIGNED)
