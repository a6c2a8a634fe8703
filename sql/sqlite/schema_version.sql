SELECT COALESCE(MAX(version), 0) FROM {{locks_schema}}
