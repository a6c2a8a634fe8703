-- Which of the version table and the lock table exist: (schema_exists, locks_exists).
SELECT to_regclass('{{locks_schema}}') IS NOT NULL AS schema_exists,
       to_regclass('{{locks}}') IS NOT NULL AS locks_exists
