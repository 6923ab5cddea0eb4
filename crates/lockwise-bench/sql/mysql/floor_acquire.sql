-- The bench floor's acquire: GET_LOCK without waiting, no fencing token. ? the lock name
SELECT GET_LOCK(?, 0)
