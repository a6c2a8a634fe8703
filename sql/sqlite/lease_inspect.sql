-- The row of one held name (live or expired): time left, owner, acquired and expires (ms since the
-- epoch, this machine's clock). ?1 name
SELECT name, holder_id, token, hold_count, expires_at - sqllock_now_ms(), owner, acquired_at, expires_at
FROM {{locks}} WHERE name = ?1 AND holder_id IS NOT NULL
