-- Applied schema versions of the lock tables.
CREATE TABLE IF NOT EXISTS {{locks_schema}} (
  version    INTEGER PRIMARY KEY,
  name       TEXT    NOT NULL,
  applied_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
)
