-- A reader-writer writer's last look at the name's readers, in [?, ?) (their rows share a prefix),
-- sent only after a plain lease_live_in_range found none live: every row of the range that still
-- names a holder (live or expired) is read FOR UPDATE (autocommit: held for this statement only),
-- so that the look waits for any transaction guarding a read hold (lease_guard.sql's LOCK IN SHARE
-- MODE) to end: a guarded read hold's transaction commits before the writer comes in. All rows, no
-- LIMIT; the caller picks the live one ending last. Same columns as lease_inspect.
SELECT {{part:lock_info}}
FROM {{locks}}
WHERE name >= ? AND name < ? AND holder_id IS NOT NULL
FOR UPDATE
