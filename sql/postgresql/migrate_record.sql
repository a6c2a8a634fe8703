-- Record an applied migration version: $1 version.
INSERT INTO {{locks_schema}} (version) VALUES ($1::int) ON CONFLICT (version) DO NOTHING
