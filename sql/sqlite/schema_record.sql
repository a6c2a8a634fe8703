-- Record an applied migration (again after a dropped lock table was created anew: ignored).
INSERT OR IGNORE INTO {{locks_schema}} (version, name) VALUES (?1, ?2)
