-- MySQL 8, after lease_release_no_returning passed the owner check: the holds left, and (when the
-- first parameter is 1 and none are left) the release of the wake-up lock, which wakes waiters in
-- other processes. Parameters: release_wake_lock (0/1), wake key.
SELECT @sqllock_holds,
       IF(? = 1 AND @sqllock_holds = 0, RELEASE_LOCK(CONCAT('sqllock:', SHA1(?))), NULL)
