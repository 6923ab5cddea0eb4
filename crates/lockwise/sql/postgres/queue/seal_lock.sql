-- Takes the seal's row for the rest of the transaction: one sealer at a time, never beside a
-- pruner (prune_lock.sql), so that the next statement sees the others' commits. No parameters.
SELECT true FROM {schema}.done_sealed FOR UPDATE
