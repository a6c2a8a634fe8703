-- MySQL 8 (no INSERT ... RETURNING): fence_advance.sql without its RETURNING; fence_read gives the
-- value. Parameter: the fence row name.
INSERT INTO {{locks}} (name, holder_id, owner, token, hold_count, acquired_at, expires_at)
VALUES (?, NULL, NULL, 1, 0, NULL, NULL)
ON DUPLICATE KEY UPDATE token = token + 1
