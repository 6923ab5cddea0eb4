-- Every queue with a job in any state, by name (the claim index's first column).
SELECT DISTINCT queue FROM {jobs} ORDER BY queue
