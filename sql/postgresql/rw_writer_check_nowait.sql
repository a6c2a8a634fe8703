-- A reader's first check of the writer row of a reader-writer lease (after storing its own reader
-- row): rw_writer_check without waiting, so that the common case (nothing holds the row) is one
-- statement. A row lock (a guard's FOR KEY SHARE, a renewal, another reader's check) makes it fail
-- with 55P03 at once; the reader then reads plainly (lease_inspect) and, when no writer is live,
-- waits with rw_writer_check. $1 writer row name.
SELECT {{part:lock_info}}
FROM {{locks}}
WHERE name = $1 AND holder_id IS NOT NULL
FOR UPDATE NOWAIT
