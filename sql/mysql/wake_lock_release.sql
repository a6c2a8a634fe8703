-- Release a wake-up lock held by this connection. Parameter: key.
SELECT RELEASE_LOCK(CONCAT('sqllock:', SHA1(?)))
