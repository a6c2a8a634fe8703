-- MySQL 8, after lease_acquire_no_returning updated an existing row: its token and hold count,
-- and (when the first parameter is 1 and this is a new acquisition) the wake-up lock beside the
-- lease. Parameters: take_wake_lock (0/1), wake key.
SELECT @sqllock_token, @sqllock_holds,
       IF(? = 1 AND @sqllock_holds = 1, GET_LOCK(CONCAT('sqllock:', SHA1(?)), 0), NULL)
