-- The row of one name if it has a holder (live or expired): $1 name.
-- Times: milliseconds left, and acquired/expires as milliseconds since the epoch (server clock).
SELECT name, holder_id, token, hold_count,
       floor(extract(epoch FROM (expires_at - clock_timestamp())) * 1000)::bigint AS ms_left,
       owner,
       floor(extract(epoch FROM acquired_at) * 1000)::bigint AS acquired_ms,
       floor(extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms
FROM {{locks}}
WHERE name = $1 AND holder_id IS NOT NULL
