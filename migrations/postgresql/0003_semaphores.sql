-- sqllock schema version 3: counting semaphores. {{locks_semaphores}} stores the number of permits
-- of each semaphore name (fixed at its first use; a holder asking with another number gets an
-- error). Permit k of semaphore S is an ordinary lease row of {{locks}} under a derived name longer
-- than 255 bytes, which no lock name can be (lock names are 1 to 255 bytes), so the name check of
-- the lock table is widened to 511 bytes: every CHECK on octet_length(name) is replaced by one
-- (idempotent; rows and tokens are kept).
-- The ALTER needs the table exclusively: waiting behind a long transaction on it would queue every
-- acquire and renewal behind the ALTER, so it gives up after 5 s instead (migrate fails; run it again).
SET LOCAL lock_timeout = '5s';
DO $$
DECLARE
  c text;
BEGIN
  FOR c IN SELECT conname FROM pg_constraint
           WHERE conrelid = '{{locks}}'::regclass AND contype = 'c'
             AND pg_get_constraintdef(oid) LIKE '%octet_length(name)%'
  LOOP
    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', '{{locks}}'::regclass, c);
  END LOOP;
  EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I CHECK (octet_length(name) BETWEEN 1 AND 511)',
                 '{{locks}}'::regclass, 'sqllock_name_length');
END
$$;
CREATE TABLE IF NOT EXISTS {{locks_semaphores}} (
  name text COLLATE "C" PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 255),
  permits integer NOT NULL CHECK (permits >= 1)
);
