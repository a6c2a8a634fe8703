-- Take the wake-up lock beside a fresh lease without waiting (1: taken, 0: busy). Parameter: key.
SELECT GET_LOCK(CONCAT('sqllock:', SHA1(?)), 0)
