-- End of migrate(). Parameter: scope (database.table).
SELECT RELEASE_LOCK(CONCAT('sqllock-migrate:', SHA1(?)))
