-- Part "acquire_conflict" (the end of an acquire's ON DUPLICATE KEY UPDATE, after the token it
-- gives a new acquisition; shared by part_acquire_upsert.sql and part_acquire_fenced_upsert.sql).
-- MySQL evaluates the assignments left to right, later ones seeing the values already assigned,
-- so the order matters: the token (before this part) and acquired_at read the old row; owner is
-- taken when the row is free or expired (or is already this owner's: the same acquire call sent
-- again after a lost answer); holder_id, hold_count and expires_at then follow the new owner.
-- This very owner's live row keeps acquired_at, its expiry never shortened; anyone else's live
-- lease (whatever their label) is left as it is. An expiry that is NULL (a row that an older
-- release inserted without one) counts as none: GREATEST(NULL, x) is NULL in MySQL and MariaDB, and
-- the new lease would never have expired.
acquired_at = IF(owner <=> VALUES(owner) AND expires_at > UTC_TIMESTAMP(6), acquired_at,
                   IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), acquired_at)),
  owner = IF(holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6) OR owner <=> VALUES(owner),
             VALUES(owner), owner),
  holder_id = IF(owner <=> VALUES(owner), VALUES(holder_id), holder_id),
  hold_count = IF(owner <=> VALUES(owner), 1, hold_count),
  expires_at = IF(owner <=> VALUES(owner), GREATEST(COALESCE(expires_at, VALUES(expires_at)), VALUES(expires_at)), expires_at)
