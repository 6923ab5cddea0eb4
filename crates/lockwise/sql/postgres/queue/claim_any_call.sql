-- One claim of several queues through the schema's function (v5.sql: ack.sql, then
-- claim_any.sql, with generic plans). $1 queues (text[]), then the parameters of
-- claim_call.sql
SELECT claimed_id AS id, claimed_queue AS queue, claimed_payload AS payload,
       claimed_attempt AS attempt, claimed_max_attempts AS max_attempts, claimed_seg AS seg
  FROM {schema}.claim_any($1, $2, $3, $4, $5, $6, $7)
