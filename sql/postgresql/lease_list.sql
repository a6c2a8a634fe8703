-- Every lock with a live lease, ordered bytewise by name (columns as lease_inspect).
SELECT name, holder_id, token, hold_count,
       floor(extract(epoch FROM (expires_at - clock_timestamp())) * 1000)::bigint AS ms_left,
       owner,
       floor(extract(epoch FROM acquired_at) * 1000)::bigint AS acquired_ms,
       floor(extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms
FROM {{locks}}
WHERE holder_id IS NOT NULL AND expires_at > clock_timestamp()
ORDER BY name COLLATE "C"
