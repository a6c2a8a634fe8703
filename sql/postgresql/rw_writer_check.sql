-- A reader's check of the writer row of a reader-writer lease (after storing its own reader row):
-- lease_inspect, reading the row FOR UPDATE, so that it waits for a transaction guarding the write
-- hold (lease_guard.sql's FOR KEY SHARE) to end: a guarded write commits before any reader comes
-- in. The times are those of the row as read before any wait (a writer that ends meanwhile is seen
-- live: the reader steps aside and looks again). $1 writer row name.
SELECT name, holder_id, token, hold_count,
       floor(extract(epoch FROM (expires_at - clock_timestamp())) * 1000)::bigint AS ms_left,
       owner,
       floor(extract(epoch FROM acquired_at) * 1000)::bigint AS acquired_ms,
       floor(extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms
FROM {{locks}}
WHERE name = $1 AND holder_id IS NOT NULL
FOR UPDATE
