-- Release one hold: $1 name, $2 holder, $3 token, $4 expected hold count (NULL: any; set when a
-- release that failed with a lost connection is sent again, so that it applies at most once),
-- $5 notification channel of the name, or NULL for no notification (client_options::notifications
-- = false: servers and poolers without LISTEN/NOTIFY).
-- Owner-checked; at hold_count 0 the row is freed (token kept, row never deleted) and, when $5 is
-- given, waiters listening on $5 are notified with the name as payload, in the same statement. The
-- commit of this one-statement transaction is asynchronous (set_config(..., is_local => true) lasts
-- only until that commit): a release lost in a crash only leaves a lease to expire.
-- Columns: remaining hold_count, notified (null), synchronous_commit setting.
WITH cfg AS (
  SELECT set_config('synchronous_commit', 'off', true) AS sync
), u AS (
  UPDATE {{locks}} AS l
  SET hold_count = l.hold_count - 1,
      holder_id = CASE WHEN l.hold_count <= 1 THEN NULL ELSE l.holder_id END,
      expires_at = CASE WHEN l.hold_count <= 1 THEN clock_timestamp() ELSE l.expires_at END
  WHERE l.name = $1 AND l.holder_id = $2 AND l.token = $3::bigint AND l.hold_count > 0
    AND ($4::bigint IS NULL OR l.hold_count = $4::bigint)
  RETURNING l.name, l.hold_count
)
SELECT u.hold_count,
       CASE WHEN u.hold_count = 0 AND $5::text IS NOT NULL THEN pg_notify($5::text, u.name) END AS notified,
       cfg.sync
FROM u CROSS JOIN cfg
