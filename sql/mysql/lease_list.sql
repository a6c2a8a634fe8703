-- Every lock with a live lease, by name (columns as lease_inspect).
SELECT {{part:lock_info}}
FROM {{locks}}
WHERE holder_id IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)
ORDER BY name
