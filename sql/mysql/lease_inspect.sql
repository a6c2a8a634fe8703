-- The row of one lock if it has a holder (live or expired): time left in microseconds, acquired
-- and expires as microseconds since the epoch (the lease connection's session time zone is UTC).
SELECT name, holder_id, token, hold_count,
       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at), owner,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01', acquired_at),
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires_at)
FROM {{locks}}
WHERE name = ? AND holder_id IS NOT NULL
