-- InnoDB's history list length: the undo records its purge thread has not yet removed, the
-- backlog that delete-marked rows (claims, completions, pruning) leave behind. No parameters.
SELECT CAST(`count` AS SIGNED) FROM information_schema.INNODB_METRICS
 WHERE name = 'trx_rseg_history_len'
