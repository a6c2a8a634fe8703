-- The InnoDB trap: is the key column the first column of a unique or primary index?
-- Parameters: schema, table, column.
SELECT COUNT(*)
FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = ?
  AND SEQ_IN_INDEX = 1 AND NON_UNIQUE = 0
