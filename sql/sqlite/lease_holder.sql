-- Who holds NAME and for how many milliseconds still (after a failed acquire). ?1 name
SELECT holder_id, expires_at - CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) FROM {{locks}} WHERE name = ?1 AND holder_id IS NOT NULL
