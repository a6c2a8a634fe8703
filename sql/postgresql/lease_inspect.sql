-- The row of one name if it has a holder (live or expired): $1 name.
SELECT name, holder_id, token, hold_count,
       floor(extract(epoch FROM (expires_at - clock_timestamp())) * 1000)::bigint AS ms_left
FROM {{locks}}
WHERE name = $1 AND holder_id IS NOT NULL
