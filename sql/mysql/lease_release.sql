-- Release one acquisition in one statement (MariaDB 10.5+: INSERT ... RETURNING; MySQL 8 runs
-- lease_release_no_returning). Owner-checked: only the row of exactly this acquisition (owner id,
-- and token unless it is 0: an acquire whose answer was lost) is touched, so the statement can be
-- sent again after a lost answer and can never free a later acquisition. The row is freed (token
-- kept, rows are never deleted; expires_at records the release time, which is how RETURNING tells
-- "freed by this statement"); but a lease acquired less than min_hold ago is kept until
-- acquired_at + min_hold (ShedLock's lockAtLeastFor). Assignments run left to right on
-- already-assigned values: expires_at first (reads the old row), then hold_count, holder_id and
-- owner, each seeing the ones before. A missing row is inserted free (nothing is released), with an
-- expiry in the past, never NULL: a NULL expiry is neither live nor expired in SQL, and an acquire
-- of such a row once kept the NULL (a lease that never expired; part_acquire_conflict.sql). A
-- freed row also releases the wake-up lock, waking waiters in other processes.
-- Parameters: name, token (insert); owner, token, token, min_us, min_us (expires_at); owner, token,
-- token (hold_count); owner, token, token (holder_id); owner, token, token (owner); then owner,
-- token, token (kept), token (freed), release_wake_lock (0/1), wake key (returning).
INSERT INTO {{locks}} (name, holder_id, owner, token, hold_count, acquired_at, expires_at)
VALUES (?, NULL, NULL, ?, 0, NULL, '1970-01-01 00:00:00')
ON DUPLICATE KEY UPDATE
  expires_at = IF(owner <=> ? AND (? = 0 OR token = ?) AND holder_id IS NOT NULL,
                  IF(acquired_at + INTERVAL ? MICROSECOND > UTC_TIMESTAMP(6),
                     acquired_at + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6)),
                  expires_at),
  hold_count = IF(owner <=> ? AND (? = 0 OR token = ?) AND holder_id IS NOT NULL
                  AND expires_at <= UTC_TIMESTAMP(6), 0, hold_count),
  holder_id = IF(owner <=> ? AND (? = 0 OR token = ?) AND hold_count = 0, NULL, holder_id),
  owner = IF(owner <=> ? AND (? = 0 OR token = ?) AND holder_id IS NULL, NULL, owner)
RETURNING owner <=> ? AND (? = 0 OR token = ?) AS kept,
  holder_id IS NULL AND token = ? AND expires_at = UTC_TIMESTAMP(6) AS freed,
  IF(? = 1 AND holder_id IS NULL AND expires_at = UTC_TIMESTAMP(6), RELEASE_LOCK(CONCAT('sqllock:', SHA1(?))), NULL)
