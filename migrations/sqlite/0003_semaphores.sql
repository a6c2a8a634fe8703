-- Version 3: counting semaphores. {{locks_semaphores}} stores the number of permits of each
-- semaphore name (fixed at its first use; a holder asking with another number gets an error).
-- Permit k of semaphore S is an ordinary lease row of {{locks}} under a derived name longer than
-- 255 bytes, which no lock name can be (lock names are 1 to 255 bytes), so the lock table's name
-- check is widened to 511 bytes here. SQLite cannot alter a CHECK constraint: the lock table is
-- rebuilt with every row (and so every fencing token) kept, inside migrate()'s transaction.
CREATE TABLE {{locks_rebuild}} (
  name        TEXT    NOT NULL PRIMARY KEY CHECK (length(CAST(name AS BLOB)) BETWEEN 1 AND 511),
  holder_id   TEXT,
  token       INTEGER NOT NULL,
  hold_count  INTEGER NOT NULL DEFAULT 0,
  acquired_at INTEGER NOT NULL DEFAULT 0,
  expires_at  INTEGER NOT NULL DEFAULT 0,
  owner       TEXT
);
INSERT INTO {{locks_rebuild}} (name, holder_id, token, hold_count, acquired_at, expires_at, owner)
  SELECT name, holder_id, token, hold_count, acquired_at, expires_at, owner FROM {{locks}};
DROP TABLE {{locks}};
ALTER TABLE {{locks_rebuild}} RENAME TO {{locks_bare}};
CREATE TABLE IF NOT EXISTS {{locks_semaphores}} (
  name    TEXT    NOT NULL PRIMARY KEY CHECK (length(CAST(name AS BLOB)) BETWEEN 1 AND 255),
  permits INTEGER NOT NULL CHECK (permits >= 1)
);
