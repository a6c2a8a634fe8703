-- Version 1: the lock table and the table recording applied migrations (InnoDB, server clock).
-- Rows of {{locks}} are never deleted: the token of a name only grows, also across restarts.
CREATE TABLE IF NOT EXISTS {{locks}} (
  name VARBINARY(255) NOT NULL,
  holder_id VARBINARY(512) NULL,
  token BIGINT NOT NULL,
  hold_count BIGINT NOT NULL DEFAULT 0,
  acquired_at DATETIME(6) NULL,
  expires_at DATETIME(6) NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS {{locks_schema}} (
  version INT NOT NULL,
  name VARCHAR(255) NOT NULL,
  applied_at DATETIME(6) NOT NULL,
  PRIMARY KEY (version)
) ENGINE=InnoDB;
