-- Whether a column holds numbers (text compared with it is read as a number: text that is none
-- reads as 0, or as its leading digits, so `WHERE id = 'two'` matches the row of id 0). cas and
-- fenced_update refuse such a key before they write. Parameters: schema, table, column. No row:
-- no such column (the statement itself then says so).
SELECT c.DATA_TYPE IN ('tinyint', 'smallint', 'mediumint', 'int', 'integer', 'bigint', 'decimal', 'numeric',
                       'float', 'double', 'real', 'bit', 'year')
FROM information_schema.COLUMNS c
WHERE c.TABLE_SCHEMA = ? AND c.TABLE_NAME = ? AND c.COLUMN_NAME = ?
