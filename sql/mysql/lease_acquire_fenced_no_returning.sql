-- MySQL 8 (no INSERT ... RETURNING): lease_acquire_fenced.sql without its RETURNING; the result is
-- read by lease_acquire_result. Parameters: name, holder label, owner id, the new token, ttl_us.
INSERT INTO {{locks}} (name, holder_id, owner, token, hold_count, acquired_at, expires_at)
VALUES (?, ?, ?, ?, 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
  token = IF(owner <=> VALUES(owner) AND expires_at > UTC_TIMESTAMP(6), token,
             IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6), VALUES(token), token)),
  acquired_at = IF(owner <=> VALUES(owner) AND expires_at > UTC_TIMESTAMP(6), acquired_at,
                   IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), acquired_at)),
  owner = IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner),
             VALUES(owner), owner),
  holder_id = IF(owner <=> VALUES(owner), VALUES(holder_id), holder_id),
  hold_count = IF(owner <=> VALUES(owner), 1, hold_count),
  expires_at = IF(owner <=> VALUES(owner), GREATEST(expires_at, VALUES(expires_at)), expires_at)
