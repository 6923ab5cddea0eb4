-- What the bench reports about the server: its version and what makes a commit durable.
SELECT current_setting('server_version') AS version,
       current_setting('fsync') AS fsync,
       current_setting('synchronous_commit') AS synchronous_commit
