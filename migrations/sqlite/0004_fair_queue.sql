-- sqllock schema version 4: the fair-mode queue (see migrations/postgresql/0004_fair_queue.sql).
-- seq is an AUTOINCREMENT rowid (never reused, so increasing per name too); the UNIQUE
-- constraints give the (name, seq) and owner indexes. Times are integer milliseconds.
CREATE TABLE IF NOT EXISTS {{locks_queue}} (
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  name        TEXT    NOT NULL CHECK (length(CAST(name AS BLOB)) BETWEEN 1 AND 255),
  owner       TEXT    NOT NULL UNIQUE,
  holder_id   TEXT    NOT NULL,
  ttl_ms      INTEGER NOT NULL,
  enqueued_at INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  UNIQUE (name, seq)
);
