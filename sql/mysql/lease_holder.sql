-- Who holds a lease that could not be acquired, and its time left in microseconds (server clock).
SELECT holder_id, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM {{locks}}
WHERE name = ?
