-- The guard of a transaction (transaction::require_lease), run inside the caller's transaction,
-- which holds SQLite's one write lock (BEGIN IMMEDIATE): no other connection can take the lease over
-- until it ends. A row comes back when the lease is still this acquisition's and has not expired.
-- ?1 name, ?2 owner id, ?3 token
SELECT 1 FROM {{locks}}
WHERE name = ?1 AND owner = ?2 AND token = ?3 AND holder_id IS NOT NULL AND expires_at > sqllock_now_ms()
