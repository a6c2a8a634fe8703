-- Administrative release whoever holds it; the token is kept. ?1 name
UPDATE {{locks}} SET holder_id = NULL, hold_count = 0, expires_at = 0
WHERE name = ?1 AND holder_id IS NOT NULL
RETURNING token
