-- Release one hold without a notification (client_options::notifications = false):
-- $1 name, $2 holder, $3 token, $4 expected hold count (NULL: any). Otherwise as lease_release.
WITH cfg AS (
  SELECT set_config('synchronous_commit', 'off', true) AS sync
), u AS (
  UPDATE {{locks}} AS l
  SET hold_count = l.hold_count - 1,
      holder_id = CASE WHEN l.hold_count <= 1 THEN NULL ELSE l.holder_id END,
      expires_at = CASE WHEN l.hold_count <= 1 THEN clock_timestamp() ELSE l.expires_at END
  WHERE l.name = $1 AND l.holder_id = $2 AND l.token = $3::bigint AND l.hold_count > 0
    AND ($4::bigint IS NULL OR l.hold_count = $4::bigint)
  RETURNING l.hold_count
)
SELECT u.hold_count, NULL AS notified, cfg.sync
FROM u CROSS JOIN cfg
