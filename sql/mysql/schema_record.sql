-- Record an applied migration. Parameters: version, file name.
INSERT IGNORE INTO {{locks_schema}} (version, name, applied_at)
VALUES (?, ?, UTC_TIMESTAMP(6))
