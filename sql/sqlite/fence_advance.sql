-- Advance the fence of a reader-writer name (rw_name.hpp) by one and return it, inside the
-- acquire's write transaction (lease_acquire_fenced then takes this value as its token). The fence
-- is a row of the lock table without holder, never a lease; every acquisition of the name's read
-- or write lock advances it, so the name's tokens form one increasing sequence. Created on first
-- use above every token the name's rows had before it (their own per-row sequences).
-- ?1 fence row name, ?2 ?3 the range [lo, hi) of every row of the name
INSERT INTO {{locks}} AS l (name, holder_id, owner, token, hold_count, acquired_at, expires_at)
VALUES (?1, NULL, NULL,
        CASE WHEN EXISTS (SELECT 1 FROM {{locks}} WHERE name = ?1) THEN 0
             ELSE coalesce((SELECT max(token) FROM {{locks}} WHERE name >= ?2 AND name < ?3), 0) + 1 END,
        0, 0, 0)
ON CONFLICT (name) DO UPDATE SET token = l.token + 1
RETURNING token
