-- Every lock with a live lease, ordered bytewise by name.
SELECT name, holder_id, token, hold_count,
       floor(extract(epoch FROM (expires_at - clock_timestamp())) * 1000)::bigint AS ms_left
FROM {{locks}}
WHERE holder_id IS NOT NULL AND expires_at > clock_timestamp()
ORDER BY name COLLATE "C"
