-- Waiter connection: block on a holder's wake-up lock for up to the given seconds. First column:
-- -1: nobody holds the key and the row has no live holder (nothing to wait for);
-- -3: nobody holds the key but the row has a live holder (one that has not taken its key yet, as
--     right after a fair hand-over, or could not take it): look again shortly;
-- -2: another client's waiter connection holds the key (passing a release on: waiting behind it
--     would only see it let go again): look again shortly;
-- 1: the key was released (now held here: release it); 0: still held at the timeout.
-- Second column, for -1, -2 and -3: the row's state as in wake_row_state.sql (read without
-- blocking; after 1 it is read again).
-- Parameters: key, name, key, key, timeout seconds, name.
SELECT IF(IS_USED_LOCK(CONCAT('sqllock:', SHA1(?))) IS NULL,
          IF(EXISTS (SELECT 1 FROM {{locks}} WHERE name = ? AND holder_id IS NOT NULL
                                                AND expires_at > UTC_TIMESTAMP(6)), -3, -1),
          IF(IS_USED_LOCK(CONCAT('sqllock-waker:', IS_USED_LOCK(CONCAT('sqllock:', SHA1(?))))) IS NOT NULL, -2,
             GET_LOCK(CONCAT('sqllock:', SHA1(?)), ?))),
       (SELECT CONCAT(token, IF(holder_id IS NULL, ' free', ' held')) FROM {{locks}} WHERE name = ?)
