-- A reader's check of the writer row of a reader-writer lease (after storing its own reader row):
-- lease_inspect, reading the row FOR UPDATE, so that it waits for a transaction guarding the write
-- hold (lease_guard.sql's FOR KEY SHARE) to end: a guarded write commits before any reader comes
-- in. The times are those of the row as read before any wait (a writer that ends meanwhile is seen
-- live: the reader steps aside and looks again). $1 writer row name.
SELECT {{part:lock_info}}
FROM {{locks}}
WHERE name = $1 AND holder_id IS NOT NULL
FOR UPDATE
