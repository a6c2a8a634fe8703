-- Serialize migrate() across processes. Parameters: scope (database.table), timeout seconds.
SELECT GET_LOCK(CONCAT('sqllock-migrate:', SHA1(?)), ?)
