-- sqllock schema version 4: the fair-mode queue (see migrations/postgresql/0004_fair_queue.sql).
-- seq is AUTO_INCREMENT (increasing, so increasing per name too); (name, seq) is the index the
-- queue's lookups use, owner is unique (one ticket per acquire call).
CREATE TABLE IF NOT EXISTS {{locks_queue}} (
  seq BIGINT NOT NULL AUTO_INCREMENT,
  name VARBINARY(255) NOT NULL,
  owner VARBINARY(80) NOT NULL,
  holder_id VARBINARY(512) NOT NULL,
  ttl_ms BIGINT NOT NULL,
  enqueued_at DATETIME(6) NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  PRIMARY KEY (seq),
  UNIQUE KEY owner_key (owner),
  KEY name_seq (name, seq)
) ENGINE=InnoDB;
