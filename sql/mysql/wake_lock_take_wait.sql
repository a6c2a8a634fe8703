-- Take the wake-up lock beside a fair lease just handed over, waiting up to the given seconds
-- (MariaDB: fractions allowed) when another client's waiter connection holds it for the instant
-- between its wake-up and its RELEASE_LOCK (1: taken, 0: still busy). Parameters: key, seconds.
SELECT GET_LOCK(CONCAT('sqllock:', SHA1(?)), ?)
