-- Release one acquisition: $1 name, $2 owner id, $3 token (0: any; an acquire whose answer was lost
-- is released by its owner id alone), $4 min_hold in milliseconds (0: none), $5 notification
-- channel of the name, or NULL for no notification (client_options::notifications = false), $6
-- whether the row is a reader-writer row (the guard check below).
-- Owner-checked: only the row of exactly this acquisition is touched, so the statement can be sent
-- again after a lost answer and can never free a later acquisition. The row is freed (token kept,
-- rows are never deleted) and, when $5 is given, waiters listening on $5 are notified in the same
-- statement; but a lease acquired less than min_hold ago is kept until acquired_at + min_hold
-- (ShedLock's lockAtLeastFor) and nobody is notified. Durable like lease_acquire: a release lost
-- in a crash would leave the lease held by an owner that will never release it.
-- A row locked by an open transaction (a guard's FOR KEY SHARE, lease_guard.sql) is not freed: the
-- release's plain UPDATE would pass that lock, and a reader-writer check does not look at a freed
-- row, so the other side could come in before the guarded transaction commits. The client holds
-- its own releases back while it knows of such a transaction (transaction::require_lease); this
-- covers the ones it cannot see end (an adopted connection's transaction, a COMMIT whose answer
-- was lost). The row is locked FOR UPDATE SKIP LOCKED first, as fair_release.sql does; when
-- anything holds it, nothing changes and one row answers guarded = true (the client sends the
-- release again shortly). Only for reader-writer rows ($6): a lock or permit row freed past a guard
-- is safe (the next acquire's takeover locks a free row FOR UPDATE, which waits for the guard), and
-- there the check would hold a release back behind any brief lock (waiters' upserts meeting the
-- row after a hand-off: 8 contending processes fell from ~240 to 24 acquisitions/s).
-- Columns: freed (false: kept until min_hold), notified (null), guarded.
WITH {{part:durable}}, t AS (
  SELECT clock_timestamp() AS now, $4::bigint * interval '1 millisecond' AS min_hold
), unguarded AS (
  SELECT 1 FROM {{locks}}
  WHERE $6::boolean AND name = $1 AND owner = $2 AND ($3::bigint = 0 OR token = $3::bigint) AND holder_id IS NOT NULL
  FOR UPDATE SKIP LOCKED
), u AS (
  UPDATE {{locks}} AS l
  SET holder_id = CASE WHEN l.acquired_at + t.min_hold > t.now THEN l.holder_id END,
      owner = CASE WHEN l.acquired_at + t.min_hold > t.now THEN l.owner END,
      hold_count = CASE WHEN l.acquired_at + t.min_hold > t.now THEN 1 ELSE 0 END,
      expires_at = CASE WHEN l.acquired_at + t.min_hold > t.now THEN l.acquired_at + t.min_hold ELSE t.now END
  FROM t CROSS JOIN durable
  WHERE l.name = $1 AND l.owner = $2 AND ($3::bigint = 0 OR l.token = $3::bigint) AND l.holder_id IS NOT NULL
    AND (NOT $6::boolean OR EXISTS (SELECT 1 FROM unguarded))
  RETURNING l.name, l.holder_id
)
SELECT u.holder_id IS NULL AS freed,
       CASE WHEN u.holder_id IS NULL AND $5::text IS NOT NULL THEN pg_notify($5::text, u.name) END::text AS notified,
       false AS guarded
FROM u
UNION ALL
SELECT false, NULL::text, true
FROM {{locks}}
WHERE $6::boolean AND name = $1 AND owner = $2 AND ($3::bigint = 0 OR token = $3::bigint) AND holder_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM unguarded)
