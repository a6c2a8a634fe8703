-- The row of one lock if it has a holder (live or expired): time left in microseconds, acquired
-- and expires as microseconds since the epoch (the lease connection's session time zone is UTC).
SELECT {{part:lock_info}}
FROM {{locks}}
WHERE name = ? AND holder_id IS NOT NULL
