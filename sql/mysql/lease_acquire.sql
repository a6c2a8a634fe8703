-- Acquire a lease in one statement (MariaDB 10.5+: INSERT ... RETURNING; MySQL 8 runs
-- lease_acquire_no_returning, then lease_acquire_result). Parameters: name, holder label, owner id
-- (unique to this acquire call), ttl_us, then owner, owner, take_wake_lock (0/1), wake key.
-- The upsert (part_acquire_upsert.sql):
--   free or expired: a new acquisition, token + 1;
--   this very owner's live row (the same acquire call sent again after a lost answer): unchanged
--   token, expiry never shortened;
--   anyone else's live lease (whatever their label): nothing changes.
-- RETURNING gives the row as it is now: acquired exactly when owner is the caller's; otherwise it
-- names the holder and its time left (microseconds, server clock). An acquisition also takes the
-- wake-up lock beside the lease (GET_LOCK, no wait), which waiters elsewhere block on.
{{part:acquire_upsert}}
RETURNING owner <=> ?, token, holder_id,
  TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at),
  IF(owner <=> ? AND ? = 1, GET_LOCK(CONCAT('sqllock:', SHA1(?)), 0), NULL)
