-- Every lock with a live lease, by name; time left in microseconds.
SELECT name, holder_id, token, hold_count,
       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM {{locks}}
WHERE holder_id IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)
ORDER BY name
