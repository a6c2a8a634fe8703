-- MySQL 8 (no INSERT ... RETURNING): owner-checked release; lease_release_result reads the holds
-- left. One hold less; at 0 the row is free (holder_id NULL), keeps its token, and expires_at
-- records the release time. hold_count is assigned first, so the following assignments see the
-- decremented count. Parameters: name, holder, token, expected hold count twice (NULL: any; set
-- when a release whose answer was lost is sent again, so that it applies at most once).
-- @sqllock_holds receives the holds left.
UPDATE {{locks}}
SET hold_count = (@sqllock_holds := hold_count - 1),
    holder_id = IF(hold_count = 0, NULL, holder_id),
    expires_at = IF(hold_count = 0, UTC_TIMESTAMP(6), expires_at)
WHERE name = ? AND holder_id = ? AND token = ? AND hold_count > 0 AND (? IS NULL OR hold_count = ?)
