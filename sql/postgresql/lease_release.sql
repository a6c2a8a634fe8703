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
-- A lease guarded by an open transaction (lease_guard.sql: FOR KEY SHARE on the row and a shared
-- transaction-scoped advisory lock on the row's name) is not freed when the row is a reader-writer
-- row ($6): the release's plain UPDATE would pass FOR KEY SHARE, and a reader-writer check does not
-- look at a freed row, so the other side could come in before the guarded transaction commits. The
-- client holds its own releases back while it knows of such a transaction
-- (transaction::require_lease); this covers the ones it cannot see end (an adopted connection's
-- transaction, a COMMIT whose answer was lost). The statement tries the advisory lock exclusively
-- (pg_try_advisory_xact_lock, held to the end of this statement's transaction); when a guard holds
-- it, nothing changes and one row answers guarded = true (the client sends the release again
-- shortly). The mark is the guard's own: a brief row lock of another statement (a reader-writer
-- check's FOR UPDATE, a waiter's upsert) is waited out as by any UPDATE, not taken for a guard (an
-- earlier FOR UPDATE SKIP LOCKED check did, and held such releases back 50 ms and more). A hash
-- collision of two names only holds a release back while the other's guard lasts. Lock and permit
-- rows need no check: a row freed past a guard is taken only by a takeover that locks it
-- FOR UPDATE, which waits for the guard (lease_acquire.sql).
-- Columns: freed (false: kept until min_hold), notified (null), guarded.
WITH {{part:durable}}, t AS (
  SELECT clock_timestamp() AS now, $4::bigint * interval '1 millisecond' AS min_hold
), unguarded AS (
  -- Volatile, so evaluated once; CASE, so the advisory lock is tried only for $6.
  SELECT CASE WHEN $6::boolean THEN pg_try_advisory_xact_lock({{part:guard_key}}) ELSE true END AS ok
), locked AS (
  -- No guard: the row is then locked FOR UPDATE before it is freed (waiting out a brief lock; no
  -- guard holds one, as every guard takes the mark before its row lock). A guard whose statement
  -- began before this one committed saw the row still held and waits for the mark; the row lock
  -- makes its FOR KEY SHARE wait too and then read the row again, freed, so it does not pass. A
  -- plain UPDATE alone would not: it leaves the key as it was, which FOR KEY SHARE passes unread.
  SELECT 1 FROM {{locks}}
  WHERE $6::boolean AND (SELECT ok FROM unguarded)
    AND name = $1 AND owner = $2 AND ($3::bigint = 0 OR token = $3::bigint) AND holder_id IS NOT NULL
  FOR UPDATE
), u AS (
  UPDATE {{locks}} AS l
  SET holder_id = CASE WHEN l.acquired_at + t.min_hold > t.now THEN l.holder_id END,
      owner = CASE WHEN l.acquired_at + t.min_hold > t.now THEN l.owner END,
      hold_count = CASE WHEN l.acquired_at + t.min_hold > t.now THEN 1 ELSE 0 END,
      expires_at = CASE WHEN l.acquired_at + t.min_hold > t.now THEN l.acquired_at + t.min_hold ELSE t.now END
  FROM t CROSS JOIN durable
  WHERE l.name = $1 AND l.owner = $2 AND ($3::bigint = 0 OR l.token = $3::bigint) AND l.holder_id IS NOT NULL
    AND (SELECT ok FROM unguarded) AND (NOT $6::boolean OR EXISTS (SELECT 1 FROM locked))
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
  AND NOT (SELECT ok FROM unguarded)
