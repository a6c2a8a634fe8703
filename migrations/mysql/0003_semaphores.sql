-- Version 3: counting semaphores. {{locks_semaphores}} stores the number of permits of each
-- semaphore name (fixed at its first use; a holder asking with another number gets an error).
-- Permit k of semaphore S is an ordinary lease row of {{locks}} under a derived name longer than
-- 255 bytes, which no lock name can be (lock names are 1 to 255 bytes), so the name column is
-- widened to 511 bytes (idempotent; every row and token is kept).
-- The ALTER needs the table's metadata lock exclusively: waiting behind a long transaction on it
-- would queue every acquire and renewal behind the ALTER, so it gives up after 5 s instead (migrate
-- fails; run it again). A session setting of migrate's own connection.
SET SESSION lock_wait_timeout = 5;
ALTER TABLE {{locks}} MODIFY COLUMN name VARBINARY(511) NOT NULL;
CREATE TABLE IF NOT EXISTS {{locks_semaphores}} (
  name VARBINARY(255) NOT NULL,
  permits INT NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB;
