-- The lease lock table: one row per lock name, never deleted, so fencing tokens only grow.
CREATE TABLE IF NOT EXISTS {{locks}} (
  name        TEXT    NOT NULL PRIMARY KEY CHECK (length(CAST(name AS BLOB)) BETWEEN 1 AND 255),
  holder_id   TEXT,                          -- NULL when free
  token       INTEGER NOT NULL,              -- fencing token of the current or last acquisition
  hold_count  INTEGER NOT NULL DEFAULT 0,    -- reentrant holds; 0 when free
  acquired_at INTEGER NOT NULL DEFAULT 0,    -- milliseconds since the epoch, this machine's clock
  expires_at  INTEGER NOT NULL DEFAULT 0
);
