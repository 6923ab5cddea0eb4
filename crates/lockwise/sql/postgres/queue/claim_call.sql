-- One claim through the schema's function `claim` (as v14.sql last replaced it: the
-- acknowledgements, then the claim, with generic plans). $1 queue, $2 batch size, $3 lease
-- (seconds), $4 worker id, $5 finished job ids, $6 their attempts, $7 their lease segments
-- (NULL where unknown)
-- flush_stats (v12.sql): the statement's table statistics are reported when it ends.
SELECT claimed_id AS id, claimed_queue AS queue, claimed_payload AS payload,
       claimed_attempt AS attempt, claimed_max_attempts AS max_attempts, claimed_seg AS seg,
       claimed_waited AS waited
  FROM {schema}.claim($1, $2, $3, $4, $5, $6, $7), {schema}.flush_stats()
