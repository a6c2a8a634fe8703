-- Owner-checked release of one acquisition: only the row of exactly this owner id (and token,
-- unless ?3 is 0: an acquire whose answer was lost) is touched, so it can be sent again after a
-- lost answer and can never free a later acquisition. The row is freed (the token is kept); a
-- lease acquired less than min_hold ago is kept until acquired_at + min_hold instead.
-- ?1 name, ?2 owner, ?3 token, ?4 min_hold in milliseconds (0: none), ?5 now: sqllock_now_ms() read
-- once by the caller (the same clock), so that every column decides alike; a FROM subquery would
-- cost SQLite an ephemeral table per release. Returns freed (1) or kept (0).
UPDATE {{locks}}
SET holder_id  = CASE WHEN acquired_at + ?4 > ?5 THEN holder_id END,
    owner      = CASE WHEN acquired_at + ?4 > ?5 THEN owner END,
    hold_count = CASE WHEN acquired_at + ?4 > ?5 THEN 1 ELSE 0 END,
    expires_at = CASE WHEN acquired_at + ?4 > ?5 THEN acquired_at + ?4 ELSE ?5 END
WHERE name = ?1 AND owner = ?2 AND (?3 = 0 OR token = ?3) AND holder_id IS NOT NULL
RETURNING holder_id IS NULL
