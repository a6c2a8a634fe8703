-- A reader's first check of the writer row of a reader-writer lease (after storing its own reader
-- row): rw_writer_check without waiting, so that the common case (nothing holds the row) is one
-- statement. SKIP LOCKED rather than NOWAIT, so that meeting a row lock (a guard's FOR KEY SHARE,
-- a renewal, another reader's check) is an answer, not an error the server logs: the first branch
-- is the row when it could be locked (its latest version), the second the row as read when it
-- could not (row_locked false; the backend reports lock_not_available and the reader reads plainly
-- with lease_inspect and, when no writer is live, waits with rw_writer_check). No row: no writer.
-- $1 writer row name.
WITH held AS (
  SELECT {{part:lock_info}}
  FROM {{locks}}
  WHERE name = $1 AND holder_id IS NOT NULL
  FOR UPDATE SKIP LOCKED
)
SELECT *, true AS row_locked FROM held
UNION ALL
SELECT {{part:lock_info}}, false
FROM {{locks}}
WHERE name = $1 AND holder_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM held)
