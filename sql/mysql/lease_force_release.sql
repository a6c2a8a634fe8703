-- Administrative release, whoever holds the lease; the token stays for the next acquisition.
UPDATE {{locks}}
SET holder_id = NULL, hold_count = 0, expires_at = NULL
WHERE name = ? AND holder_id IS NOT NULL
