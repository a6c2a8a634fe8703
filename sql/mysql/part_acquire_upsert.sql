-- Part "acquire_upsert" (the upsert of lease_acquire.sql and of its MySQL 8 form
-- lease_acquire_no_returning.sql): parameters name, holder label, owner id (unique to this
-- acquire call), ttl_us. A new acquisition, on a free or expired row, gets token + 1; this very
-- owner's live row keeps its token; anyone else's live lease is not changed.
INSERT INTO {{locks}} (name, holder_id, owner, token, hold_count, acquired_at, expires_at)
VALUES (?, ?, ?, 1, 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
  token = IF(owner <=> VALUES(owner) AND expires_at > UTC_TIMESTAMP(6), token,
             IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6), token + 1, token)),
  {{part:acquire_conflict}}
