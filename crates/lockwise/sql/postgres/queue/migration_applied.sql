-- Records an applied queue migration. $1 version
INSERT INTO {schema}.queue_migrations (version) VALUES ($1)
