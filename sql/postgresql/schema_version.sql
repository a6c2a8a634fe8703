-- The newest applied schema version (run only when the version table exists).
SELECT coalesce(max(version), 0) FROM {{locks_schema}}
