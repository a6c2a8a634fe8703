-- A reader's check of the writer row of a reader-writer lease (after storing its own reader row):
-- lease_inspect as a locking read (FOR UPDATE, autocommit: held for this statement only), so that
-- it waits for a transaction guarding the write hold (lease_guard.sql's LOCK IN SHARE MODE) to end:
-- a guarded write commits before any reader comes in. ? writer row name.
SELECT {{part:lock_info}}
FROM {{locks}}
WHERE name = ? AND holder_id IS NOT NULL
FOR UPDATE
