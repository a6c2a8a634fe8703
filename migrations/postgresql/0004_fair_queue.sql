-- sqllock schema version 4: the fair-mode queue. A fair acquire takes a ticket: a row of
-- {{locks_queue}} with an increasing seq (identity: increasing per name too), the waiter's owner id
-- (one per acquire call, unique) and label, and an expiry on the database clock that the waiter
-- keeps pushing forward while it waits (ttl_ms). The lock goes to the lowest live ticket of a name;
-- a release by a fair holder hands the lock row straight to it (fair_release.sql). The primary key
-- (name, seq) is the index both lookups use.
CREATE TABLE IF NOT EXISTS {{locks_queue}} (
  name text COLLATE "C" NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 255),
  seq bigint GENERATED ALWAYS AS IDENTITY,
  owner text NOT NULL UNIQUE,
  holder_id text NOT NULL,
  ttl_ms bigint NOT NULL CHECK (ttl_ms >= 1),
  enqueued_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (name, seq)
);
