-- The row of one lock if it has a holder (live or expired); time left in microseconds.
SELECT name, holder_id, token, hold_count,
       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM {{locks}}
WHERE name = ? AND holder_id IS NOT NULL
