-- Waiter connection: block on a holder's wake-up lock for up to the given seconds.
-- -1: nobody holds it (nothing to wait for); 1: it was released (now held here: release it);
-- 0: still held at the timeout. Parameters: key, key, timeout seconds.
SELECT IF(IS_USED_LOCK(CONCAT('sqllock:', SHA1(?))) IS NULL, -1,
          GET_LOCK(CONCAT('sqllock:', SHA1(?)), ?))
