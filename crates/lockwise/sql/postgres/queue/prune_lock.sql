-- seal_lock.sql for a pruner: one pruner at a time, never beside a sealer, so that the next
-- statement sees the cutoffs and counts the others left and no job is pruned twice. No
-- parameters.
SELECT true FROM {schema}.done_sealed FOR UPDATE
