-- Every live lease (columns as lease_inspect).
SELECT name, holder_id, token, hold_count, expires_at - sqllock_now_ms() AS left_ms, owner, acquired_at, expires_at
FROM {{locks}} WHERE holder_id IS NOT NULL AND expires_at > sqllock_now_ms()
ORDER BY name
