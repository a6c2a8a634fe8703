-- Acquire a lease in one statement (MariaDB 10.5+: INSERT ... RETURNING; MySQL 8 uses
-- lease_acquire_no_returning + lease_acquire_result). Parameters: name, holder, ttl_us (insert),
-- holder, holder, holder, holder, ttl_us (update), holder, take_wake_lock (0/1), wake key (returning).
-- MySQL evaluates the assignments left to right and later ones see the values already assigned,
-- so every condition reads the old holder_id and expires_at until holder_id itself is assigned,
-- and expires_at (last) tests the new holder_id:
--   free, expired, or same holder but expired: token + 1, hold_count 1 (a new acquisition);
--   same holder and still live: token kept, hold_count + 1 (reentrant);
--   someone else live: nothing changes.
-- RETURNING gives the row as it is now: acquired exactly when holder_id is the caller; otherwise
-- it names the holder and its time left (microseconds, server clock). A new acquisition also
-- takes the wake-up lock beside the lease (GET_LOCK, no wait), which waiters elsewhere block on.
INSERT INTO {{locks}} (name, holder_id, token, hold_count, acquired_at, expires_at)
VALUES (?, ?, 1, 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
  token = IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6), token + 1, token),
  hold_count = IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6), 1,
                  IF(holder_id = ?, hold_count + 1, hold_count)),
  acquired_at = IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6),
                   acquired_at),
  holder_id = IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6) OR holder_id = ?, ?,
                 holder_id),
  expires_at = IF(holder_id = ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, expires_at)
RETURNING holder_id, token, hold_count,
  TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at),
  IF(holder_id = ? AND hold_count = 1 AND ? = 1, GET_LOCK(CONCAT('sqllock:', SHA1(?)), 0), NULL)
