-- Owner-checked release: one hold less; at zero the row is freed (the token is kept).
-- ?1 name, ?2 holder, ?3 token
UPDATE {{locks}}
SET hold_count = hold_count - 1,
    holder_id  = CASE WHEN hold_count <= 1 THEN NULL ELSE holder_id END,
    expires_at = CASE WHEN hold_count <= 1 THEN 0 ELSE expires_at END
WHERE name = ?1 AND holder_id = ?2 AND token = ?3
RETURNING hold_count
