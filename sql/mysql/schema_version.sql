-- The newest applied migration (the table is missing before the first migrate).
SELECT COALESCE(MAX(version), 0) FROM {{locks_schema}}
