-- The row of one held name (live or expired). ?1 name
SELECT name, holder_id, token, hold_count, expires_at - CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
FROM {{locks}} WHERE name = ?1 AND holder_id IS NOT NULL
