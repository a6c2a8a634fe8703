-- Every live lease.
SELECT name, holder_id, token, hold_count, expires_at - CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) AS left_ms
FROM {{locks}} WHERE holder_id IS NOT NULL AND expires_at > CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)
ORDER BY name
