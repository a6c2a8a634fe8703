-- The guard of a transaction (transaction::require_lease), run inside the caller's transaction:
-- name, owner id, token. A row comes back when the lease is still this acquisition's and has not
-- expired (server clock); the locking read takes a shared lock on the row until the transaction
-- ends, which a takeover's upsert waits for. (InnoDB has no key-share lock: this lease's own
-- renewals wait for it too, so guarded transactions must stay well inside the TTL.)
SELECT 1 FROM {{locks}}
WHERE name = ? AND owner = ? AND token = ? AND holder_id IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)
LOCK IN SHARE MODE
