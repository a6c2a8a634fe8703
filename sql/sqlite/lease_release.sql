-- Owner-checked release: one hold less; at zero the row is freed (the token is kept).
-- ?1 name, ?2 holder, ?3 token, ?4 expected hold count (NULL: any; set when a release whose answer
-- was lost is sent again, so that it applies at most once)
UPDATE {{locks}}
SET hold_count = hold_count - 1,
    holder_id  = CASE WHEN hold_count <= 1 THEN NULL ELSE holder_id END,
    expires_at = CASE WHEN hold_count <= 1 THEN 0 ELSE expires_at END
WHERE name = ?1 AND holder_id = ?2 AND token = ?3 AND (?4 IS NULL OR hold_count = ?4)
RETURNING hold_count
