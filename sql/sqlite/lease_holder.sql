-- Who holds NAME and for how many milliseconds still (after a failed acquire). ?1 name
SELECT holder_id, expires_at - sqllock_now_ms() FROM {{locks}} WHERE name = ?1 AND holder_id IS NOT NULL
