-- The bench floor's release. ? the lock name
SELECT RELEASE_LOCK(?)
