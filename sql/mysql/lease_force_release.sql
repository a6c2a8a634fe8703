-- Administrative release, whoever holds the lease; the token stays for the next acquisition.
UPDATE {{locks}}
SET holder_id = NULL, owner = NULL, hold_count = 0, expires_at = UTC_TIMESTAMP(6)
WHERE name = ? AND holder_id IS NOT NULL
