-- A reader-writer writer's last look at the name's readers, in [$1, $2) (their rows share a
-- prefix), sent only after a plain lease_live_in_range found none live: every row of the range
-- that still names a holder (live or expired) is read FOR UPDATE, so that the look waits for any
-- transaction guarding a read hold (lease_guard.sql's FOR KEY SHARE) to end: a guarded read hold's
-- transaction commits before the writer comes in. All rows, no LIMIT (a LIMIT would lock only the
-- rows returned); rows locked after a wait are re-read, so the caller picks the live one ending
-- last itself. Same columns as lease_inspect.
SELECT {{part:lock_info}}
FROM {{locks}}
WHERE name >= $1 AND name < $2 AND holder_id IS NOT NULL
FOR UPDATE
