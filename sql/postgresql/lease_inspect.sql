-- The row of one name if it has a holder (live or expired): $1 name.
-- Times: milliseconds left, and acquired/expires as milliseconds since the epoch (server clock).
SELECT {{part:lock_info}}
FROM {{locks}}
WHERE name = $1 AND holder_id IS NOT NULL
