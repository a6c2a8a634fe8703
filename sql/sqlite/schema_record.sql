INSERT INTO {{locks_schema}} (version, name) VALUES (?1, ?2)
