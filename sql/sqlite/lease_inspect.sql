-- The row of one held name (live or expired). ?1 name
SELECT name, holder_id, token, hold_count, expires_at - sqllock_now_ms()
FROM {{locks}} WHERE name = ?1 AND holder_id IS NOT NULL
