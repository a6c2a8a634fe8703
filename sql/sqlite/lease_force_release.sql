-- Administrative release whoever holds it; the token is kept. ?1 name
UPDATE {{locks}} SET holder_id = NULL, owner = NULL, hold_count = 0, expires_at = sqllock_now_ms()
WHERE name = ?1 AND holder_id IS NOT NULL
RETURNING token
