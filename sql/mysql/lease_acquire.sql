-- Acquire a lease in one statement (MariaDB 10.5+: INSERT ... RETURNING; MySQL 8 runs
-- lease_acquire_no_returning, then lease_acquire_result). Parameters: name, holder label, owner id
-- (unique to this acquire call), ttl_us, then owner, take_wake_lock (0/1), owner, wake key.
-- MySQL evaluates ON DUPLICATE KEY UPDATE assignments left to right, later ones seeing the values
-- already assigned, so the order matters: token and acquired_at read the old row; owner is taken
-- when the row is free or expired (or is already this owner's: the same acquire call sent again
-- after a lost answer); holder_id, hold_count and expires_at then follow the new owner.
--   free or expired: a new acquisition, token + 1;
--   this very owner's live row: unchanged token, expiry never shortened;
--   anyone else's live lease (whatever their label): nothing changes.
-- RETURNING gives the row as it is now: acquired exactly when owner is the caller's; otherwise it
-- names the holder and its time left (microseconds, server clock). An acquisition also takes the
-- wake-up lock beside the lease (GET_LOCK, no wait), which waiters elsewhere block on.
INSERT INTO {{locks}} (name, holder_id, owner, token, hold_count, acquired_at, expires_at)
VALUES (?, ?, ?, 1, 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
  token = IF(owner <=> VALUES(owner) AND expires_at > UTC_TIMESTAMP(6), token,
             IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6), token + 1, token)),
  acquired_at = IF(owner <=> VALUES(owner) AND expires_at > UTC_TIMESTAMP(6), acquired_at,
                   IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), acquired_at)),
  owner = IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner),
             VALUES(owner), owner),
  holder_id = IF(owner <=> VALUES(owner), VALUES(holder_id), holder_id),
  hold_count = IF(owner <=> VALUES(owner), 1, hold_count),
  expires_at = IF(owner <=> VALUES(owner), GREATEST(expires_at, VALUES(expires_at)), expires_at)
RETURNING owner <=> ?, token, holder_id,
  TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at),
  IF(owner <=> ? AND ? = 1, GET_LOCK(CONCAT('sqllock:', SHA1(?)), 0), NULL)
