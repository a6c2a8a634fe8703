-- Owner-checked release in one statement (MariaDB 10.5+: INSERT ... RETURNING; MySQL 8 uses
-- lease_release_no_returning + lease_release_result). Where name, holder and token match: one
-- hold less; at 0 the row is free (holder_id NULL), keeps its token, and its expires_at records
-- the release time, which is how RETURNING tells "freed by this statement" from "already free".
-- A missing row is inserted free (token = the caller's; nothing is released). Assignments run
-- left to right on already-assigned values: expires_at first (reads the old count), then
-- hold_count, then holder_id (reads the new count). At 0 it also releases the wake-up lock,
-- waking waiters in other processes.
-- With an expected hold count (NULL: any), the hold is released only while the row counts exactly
-- that many: the core sends a release whose answer was lost again that way, so that it applies at
-- most once. (holder_id needs no such check: it is cleared only when the new count is 0.)
-- Parameters: name, token (insert), holder, token, expected, expected, holder, token, expected,
-- expected, holder, token (update), release_wake_lock (0/1), token, wake key (returning).
INSERT INTO {{locks}} (name, holder_id, token, hold_count, acquired_at, expires_at)
VALUES (?, NULL, ?, 0, NULL, NULL)
ON DUPLICATE KEY UPDATE
  expires_at = IF(holder_id = ? AND token = ? AND hold_count = 1 AND (? IS NULL OR hold_count = ?),
                  UTC_TIMESTAMP(6), expires_at),
  hold_count = IF(holder_id = ? AND token = ? AND hold_count > 0 AND (? IS NULL OR hold_count = ?),
                  hold_count - 1, hold_count),
  holder_id = IF(holder_id = ? AND token = ? AND hold_count = 0, NULL, holder_id)
RETURNING holder_id, token, hold_count, expires_at = UTC_TIMESTAMP(6),
  IF(? = 1 AND holder_id IS NULL AND token = ? AND expires_at = UTC_TIMESTAMP(6),
     RELEASE_LOCK(CONCAT('sqllock:', SHA1(?))), NULL)
