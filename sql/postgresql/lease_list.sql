-- Every lock with a live lease, ordered bytewise by name (columns as lease_inspect).
SELECT {{part:lock_info}}
FROM {{locks}}
WHERE holder_id IS NOT NULL AND expires_at > clock_timestamp()
ORDER BY name COLLATE "C"
