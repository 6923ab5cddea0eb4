-- The lab's own data table: the resource a fencing token protects (the user's side of the
-- lesson). Written only after the fence accepted the writer's token, in one transaction.
CREATE TABLE IF NOT EXISTS {schema}.lab_data (
    resource text PRIMARY KEY,
    value text NOT NULL,
    token bigint NOT NULL
)
