-- Part "acquire_fenced_upsert" (the upsert of lease_acquire_fenced.sql and of its MySQL 8 form
-- lease_acquire_fenced_no_returning.sql): parameters name, holder label, owner id, the new token
-- (the fence's value), ttl_us. A new acquisition, on a free or expired row, gets the new token;
-- this very owner's live row keeps its token; anyone else's live lease is not changed.
INSERT INTO {{locks}} (name, holder_id, owner, token, hold_count, acquired_at, expires_at)
VALUES (?, ?, ?, ?, 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
  token = IF(owner <=> VALUES(owner) AND expires_at > UTC_TIMESTAMP(6), token,
             IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6), VALUES(token), token)),
  {{part:acquire_conflict}}
