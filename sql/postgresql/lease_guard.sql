-- The guard of a transaction (transaction::require_lease), run inside the caller's transaction:
-- $1 name, $2 owner id, $3 token. A row comes back when the lease is still this acquisition's and
-- has not expired (server clock); it then stays locked FOR KEY SHARE until the transaction ends.
-- That lock conflicts with the FOR UPDATE strength of a takeover's INSERT ... ON CONFLICT DO UPDATE
-- (which waits, then sees the row as the guarded transaction left it), and not with the plain
-- UPDATEs of this lease's own renewals and release, which go on. A lease of an earlier timeline
-- (granted before a failover, see lease_acquire.sql) does not pass. The guard also takes a shared
-- transaction-scoped advisory lock on the row's name (part_guard_key.sql): the mark by which a
-- release of a reader-writer row, which passes FOR KEY SHARE, knows that a guard is open
-- (lease_release.sql), also on an adopted connection whose transaction the client cannot see end.
-- Taken for the rows that pass (the select list) and, like the row lock, held until the
-- transaction ends.
SELECT 1, pg_advisory_xact_lock_shared({{part:guard_key}}) FROM {{locks}}
WHERE name = $1 AND owner = $2 AND token = $3::bigint AND holder_id IS NOT NULL
  AND expires_at > clock_timestamp()
  AND (token >> 40) >= ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint - 1
FOR KEY SHARE
