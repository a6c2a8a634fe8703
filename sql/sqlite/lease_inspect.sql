-- The row of one held name (live or expired): time left, owner, acquired and expires (ms since the
-- epoch, this machine's clock). ?1 name
SELECT {{part:lock_info}}
FROM {{locks}} WHERE name = ?1 AND holder_id IS NOT NULL
