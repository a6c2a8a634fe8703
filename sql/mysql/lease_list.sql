-- Every lock with a live lease, by name (columns as lease_inspect).
SELECT name, holder_id, token, hold_count,
       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at), owner,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01', acquired_at),
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires_at)
FROM {{locks}}
WHERE holder_id IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)
ORDER BY name
