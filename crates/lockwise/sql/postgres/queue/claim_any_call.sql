-- One claim of several queues through the schema's function `claim_any` (as v14.sql last
-- replaced it: the acknowledgements, then the claim, with generic plans). $1 queues (text[]),
-- then the parameters of claim_call.sql
-- flush_stats (v12.sql): the statement's table statistics are reported when it ends.
SELECT claimed_id AS id, claimed_queue AS queue, claimed_payload AS payload,
       claimed_attempt AS attempt, claimed_max_attempts AS max_attempts, claimed_seg AS seg,
       claimed_waited AS waited
  FROM {schema}.claim_any($1, $2, $3, $4, $5, $6, $7), {schema}.flush_stats()
