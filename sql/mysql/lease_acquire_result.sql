-- MySQL 8, after lease_acquire_no_returning: the row as it is now (acquired exactly when the owner
-- is the caller's; the token only changes with the owner, so it is this acquisition's).
-- Parameters: owner, name. Columns as lease_acquire's RETURNING, without the wake-up lock.
SELECT owner <=> ?, token, holder_id, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM {{locks}}
WHERE name = ?
