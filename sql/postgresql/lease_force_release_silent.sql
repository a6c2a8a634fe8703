-- Administrative release without a notification (notifications off): $1 name.
UPDATE {{locks}}
SET holder_id = NULL, hold_count = 0, expires_at = clock_timestamp()
WHERE name = $1 AND holder_id IS NOT NULL
RETURNING name
