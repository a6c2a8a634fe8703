-- The InnoDB trap: a unique or primary index whose first column is the key column, which
-- lock_rows then forces (left to itself the optimizer may scan the whole table, and InnoDB locks
-- every row it scans); and whether the column holds text (a number compared with it is compared
-- as a number, which no index serves); and the table's engine (only InnoDB keeps row locks until
-- the transaction ends: Aria, MyISAM or MEMORY hold nothing past the statement); and whether the
-- column holds numbers (text compared with it is read as a number: text that is none reads as 0,
-- or as its leading digits). PRIMARY first, then the index of fewest columns.
-- Parameters: schema, table, column. No row: no usable index.
SELECT s.INDEX_NAME,
       c.DATA_TYPE IN ('char', 'varchar', 'binary', 'varbinary', 'tinytext', 'text', 'mediumtext',
                       'longtext', 'tinyblob', 'blob', 'mediumblob', 'longblob', 'enum', 'set'),
       t.ENGINE,
       c.DATA_TYPE IN ('tinyint', 'smallint', 'mediumint', 'int', 'integer', 'bigint', 'decimal', 'numeric',
                       'float', 'double', 'real', 'bit', 'year')
FROM information_schema.STATISTICS s
JOIN information_schema.COLUMNS c
  ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME
JOIN information_schema.TABLES t
  ON t.TABLE_SCHEMA = s.TABLE_SCHEMA AND t.TABLE_NAME = s.TABLE_NAME
WHERE s.TABLE_SCHEMA = ? AND s.TABLE_NAME = ? AND s.COLUMN_NAME = ?
  AND s.SEQ_IN_INDEX = 1 AND s.NON_UNIQUE = 0
ORDER BY s.INDEX_NAME = 'PRIMARY' DESC,
         (SELECT MAX(w.SEQ_IN_INDEX) FROM information_schema.STATISTICS w
          WHERE w.TABLE_SCHEMA = s.TABLE_SCHEMA AND w.TABLE_NAME = s.TABLE_NAME
            AND w.INDEX_NAME = s.INDEX_NAME),
         s.INDEX_NAME
LIMIT 1
