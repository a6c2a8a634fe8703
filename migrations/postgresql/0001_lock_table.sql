-- sqllock schema version 1: the lock table (one row per name, never deleted) and the version table.
-- Applied by migrate() inside one transaction that first takes pg_advisory_xact_lock, so many
-- processes may run it at once; every statement is also idempotent on its own.
CREATE TABLE IF NOT EXISTS {{locks_schema}} (
  version integer PRIMARY KEY,
  applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS {{locks}} (
  name text COLLATE "C" PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 255),
  holder_id text,
  token bigint NOT NULL,
  hold_count bigint NOT NULL DEFAULT 0,
  acquired_at timestamptz,
  expires_at timestamptz,
  CHECK ((holder_id IS NULL) = (hold_count = 0))
) WITH (fillfactor = 70);
