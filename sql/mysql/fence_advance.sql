-- Advance the fence of a reader-writer name (rw_name.hpp) by one and return it (MariaDB; MySQL 8
-- runs fence_advance_no_returning, then fence_read). Runs first in the acquire's transaction, so
-- the fence row stays locked until that transaction ends: acquirers of the name take turns on it
-- before they lock a lease row (renewals and releases lock lease rows only). The fence is a row
-- of the lock table without holder, never a lease; every acquisition of the name's read or write
-- lock takes its value as its token (lease_acquire_fenced), so the name's tokens form one
-- increasing sequence. A fence created now says 1; fence_floor then lifts it above the name's
-- rows from before it. Parameter: the fence row name.
INSERT INTO {{locks}} (name, holder_id, owner, token, hold_count, acquired_at, expires_at)
VALUES (?, NULL, NULL, 1, 0, NULL, NULL)
ON DUPLICATE KEY UPDATE token = token + 1
RETURNING token
