-- seal_lock.sql for a pruner: FOR SHARE, so pruners run side by side but never beside a
-- sealer. No parameters.
SELECT until FROM {schema}.done_sealed FOR SHARE
