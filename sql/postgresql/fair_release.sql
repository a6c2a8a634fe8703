-- Release of a fair lease, with hand-over: $1 name, $2 owner id, $3 token (0: any; an abandoned
-- acquire is released by owner id alone), $4 notification channel of the name or NULL.
-- Owner-checked like lease_release.sql. When the name has a live ticket of another owner, the row
-- is not freed but handed in the same statement to the lowest one: holder and owner become the
-- ticket's, the token grows (token + 1, at least the timeline's first token as in
-- lease_acquire.sql), and the lease ends ttl_ms (the ticket's short TTL) from now, so a grantee
-- that died meanwhile stalls the queue no longer than a dead waiter would. The grantee learns it
-- holds by its next poll (queue_state.sql answers the token: the grantee's watchdog then extends
-- the lease to its own TTL; with auto_renew off its acquire statement extends it instead). The
-- releaser's ticket is deleted whatever the owner check says (an abandoned waiter leaves the queue).
-- A transaction guarding the lease (lease_guard.sql's FOR KEY SHARE) holds the hand-over off: the
-- hand-over is a plain UPDATE, which that lock does not stop, and the grantee's acquire then finds
-- its own live lease and takes no FOR UPDATE either, so the next holder could write before the
-- guarded transaction commits. So the statement first tries the guard's mark exclusively (the
-- shared transaction-scoped advisory lock lease_guard.sql takes, part_guard_key.sql): when a guard
-- holds it, the row is freed as by lease_release.sql instead, and the next acquire's takeover waits
-- for the guard (lease_acquire.sql); the ticket keeps its place in the queue. A brief row lock of
-- another statement (a waiter's poll meeting the row) is waited out as by any UPDATE: an earlier
-- FOR UPDATE SKIP LOCKED check took it for a guard and freed the row instead of handing it over.
-- Durable like lease_acquire.
-- Columns: released, next_owner, notified (null).
WITH {{part:epoch}}, {{part:durable}}, t AS (
  SELECT clock_timestamp() AS now
), unguarded AS (
  SELECT pg_try_advisory_xact_lock({{part:guard_key}}) AS ok  -- volatile, so evaluated once
), locked AS (
  -- No guard: the row is locked FOR UPDATE before it is handed over, so a guard whose statement
  -- began before this one committed waits and reads the row again (see lease_release.sql).
  SELECT 1 FROM {{locks}}
  WHERE (SELECT ok FROM unguarded)
    AND name = $1 AND owner = $2 AND ($3::bigint = 0 OR token = $3::bigint) AND holder_id IS NOT NULL
  FOR UPDATE
), nxt AS (
  SELECT q.owner, q.holder_id, q.ttl_ms FROM {{locks_queue}} AS q CROSS JOIN t
  WHERE q.name = $1 AND q.owner <> $2 AND q.expires_at > t.now AND EXISTS (SELECT 1 FROM locked)
  ORDER BY q.seq
  LIMIT 1
), u AS (
  UPDATE {{locks}} AS l
  SET holder_id = nxt.holder_id,
      owner = nxt.owner,
      token = CASE WHEN nxt.owner IS NULL THEN l.token ELSE greatest(l.token + 1, epoch.first_token) END,
      hold_count = CASE WHEN nxt.owner IS NULL THEN 0 ELSE 1 END,
      acquired_at = CASE WHEN nxt.owner IS NULL THEN l.acquired_at ELSE t.now END,
      expires_at = CASE WHEN nxt.owner IS NULL THEN t.now ELSE t.now + nxt.ttl_ms * interval '1 millisecond' END
  FROM t CROSS JOIN durable CROSS JOIN epoch LEFT JOIN nxt ON true
  WHERE l.name = $1 AND l.owner = $2 AND ($3::bigint = 0 OR l.token = $3::bigint) AND l.holder_id IS NOT NULL
  RETURNING l.name, l.owner
), gone AS (
  DELETE FROM {{locks_queue}} WHERE owner = $2
)
SELECT EXISTS (SELECT 1 FROM u) AS released,
       (SELECT owner FROM u) AS next_owner,
       CASE WHEN EXISTS (SELECT 1 FROM u) AND $4::text IS NOT NULL THEN pg_notify($4::text, $1) END AS notified
