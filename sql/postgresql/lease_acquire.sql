-- Acquire a lease in one statement: $1 name, $2 holder label, $3 owner id (unique to this acquire
-- call), $4 ttl in milliseconds.
-- Inserts the row, or takes it over when it is free or expired: a new acquisition, token + 1. When
-- the row is this very owner's live acquisition (the same acquire call sent again after its answer
-- was lost), it is returned as it is: same token, expiry never shortened. A live lease of anyone
-- else, including another client with the same label, is never taken: re-entry is the client's
-- bookkeeping, not the row's. ON CONFLICT never raises a duplicate-key error. When nothing is
-- acquired, the second branch reports the holder's label and milliseconds left.
-- Fast path: when the snapshot shows the lease held live by another owner, the INSERT's row source
-- is empty, so the statement touches no row: no row lock, no transaction id, no WAL flush at commit.
-- The ON CONFLICT WHERE still decides whenever a row is proposed (a row that changed after the
-- snapshot), so the NOT EXISTS is only an optimization, never the guard.
-- Durable: where the server's synchronous_commit is off, local or remote_write, this statement's
-- own transaction commits with 'on' (flushed locally, and by the synchronous standbys if any): a
-- token lost in a crash or a failover could otherwise be handed out again.
-- Epoch (failover): a promoted standby runs on a new, larger timeline. The token of a new
-- acquisition is at least (timeline - 1) << 40, so on timeline T tokens lie in [(T-1)<<40, T<<40)
-- (fewer than 2^40 acquisitions of one name on one timeline), and the first acquisition after a
-- promotion jumps past every token the old primary could have issued, even ones the standby never
-- received. On timeline 1 the floor is 0: tokens go on as token + 1. The timeline is the first 8
-- hex digits of the current WAL file name (readable by any role, unlike pg_control_checkpoint(),
-- whose timeline only changes at the first checkpoint after promotion). lease_renew.sql refuses
-- leases of an earlier timeline.
-- Columns: acquired, token, holder_id, ms_left.
WITH {{part:epoch}}, {{part:durable}}, prev AS (
  SELECT holder_id, owner, expires_at FROM {{locks}} WHERE name = $1
), takeover AS (
  -- A free or expired row is locked FOR UPDATE before it is taken: that waits for every
  -- transaction guarding the old lease (FOR KEY SHARE, lease_guard.sql) to end, while the old
  -- holder's own renewals and release (plain UPDATEs: FOR NO KEY UPDATE) never wait for a guard.
  SELECT count(*) AS locked FROM (
    SELECT 1 FROM {{locks}}
    WHERE name = $1 AND (holder_id IS NULL OR expires_at <= clock_timestamp()) AND owner IS DISTINCT FROM $3
    FOR UPDATE
  ) AS candidate
), up AS (
  INSERT INTO {{locks}} AS l (name, holder_id, owner, token, hold_count, acquired_at, expires_at)
  SELECT $1, $2, $3, epoch.first_token, 1, clock_timestamp(), clock_timestamp() + $4::bigint * interval '1 millisecond'
  FROM takeover CROSS JOIN epoch
  WHERE NOT EXISTS (SELECT 1 FROM prev
                    WHERE prev.holder_id IS NOT NULL AND prev.owner IS DISTINCT FROM $3
                      AND prev.expires_at > clock_timestamp())
  ON CONFLICT (name) DO UPDATE SET
    token = CASE WHEN l.owner = excluded.owner AND l.expires_at > excluded.acquired_at
                 THEN l.token ELSE greatest(l.token + 1, excluded.token) END,
    {{part:acquire_conflict}}
)
{{part:acquire_answer}}
