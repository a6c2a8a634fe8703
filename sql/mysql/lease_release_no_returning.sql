-- MySQL 8 (no INSERT ... RETURNING): the owner-checked release of lease_release.sql as an UPDATE
-- (the affected row count tells whether the owner check passed). hold_count is assigned after
-- expires_at and sees its new value; holder_id and owner follow. Parameters: min_us, min_us, then
-- name, owner, token, token.
UPDATE {{locks}}
SET expires_at = IF(acquired_at + INTERVAL ? MICROSECOND > UTC_TIMESTAMP(6),
                    acquired_at + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6)),
    hold_count = IF(expires_at <= UTC_TIMESTAMP(6), 0, hold_count),
    holder_id = IF(hold_count = 0, NULL, holder_id),
    owner = IF(holder_id IS NULL, NULL, owner)
WHERE name = ? AND owner = ? AND (? = 0 OR token = ?) AND holder_id IS NOT NULL
