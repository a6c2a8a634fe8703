-- A reader's first check of the writer row of a reader-writer lease (after storing its own reader
-- row): rw_writer_check without waiting, so that the common case (nothing holds the row) is one
-- statement. A row lock (a guard's LOCK IN SHARE MODE, a renewal, another reader's check) makes it
-- fail at once (MariaDB 1205, MySQL 8 3572); the reader then reads plainly (lease_inspect) and,
-- when no writer is live, waits with rw_writer_check. ? writer row name.
SELECT {{part:lock_info}}
FROM {{locks}}
WHERE name = ? AND holder_id IS NOT NULL
FOR UPDATE NOWAIT
