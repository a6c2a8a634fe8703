-- Every live lease (columns as lease_inspect).
SELECT {{part:lock_info}}
FROM {{locks}} WHERE holder_id IS NOT NULL AND expires_at > sqllock_now_ms()
ORDER BY name
