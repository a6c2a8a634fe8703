-- MySQL 8 (no INSERT ... RETURNING): acquire in one statement; the result is read by
-- lease_acquire_result (after an update) or lease_holder (when not acquired).
-- Parameters: name, holder, ttl_us (insert), then holder, holder, holder, holder, ttl_us (update).
-- MySQL evaluates the assignments left to right and later ones see the values already assigned,
-- so every condition reads the old holder_id and expires_at until holder_id itself is assigned,
-- and expires_at (last) tests the new holder_id:
--   free, expired, or same holder but expired: token + 1, hold_count 1 (a new acquisition);
--   same holder and still live: token kept, hold_count + 1 (reentrant);
--   someone else live: nothing changes (0 affected rows; 1 = inserted, 2 = updated).
-- @sqllock_token and @sqllock_holds capture the result of the update branch for the follow-up read.
INSERT INTO {{locks}} (name, holder_id, token, hold_count, acquired_at, expires_at)
VALUES (?, ?, 1, 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
  token = (@sqllock_token := IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6),
                                token + 1, token)),
  hold_count = (@sqllock_holds := IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6), 1,
                                     IF(holder_id = ?, hold_count + 1, hold_count))),
  acquired_at = IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6),
                   acquired_at),
  holder_id = IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6) OR holder_id = ?, ?,
                 holder_id),
  expires_at = IF(holder_id = ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, expires_at)
