-- Acquire a lease in one statement: $1 name, $2 holder, $3 ttl in milliseconds.
-- Inserts the row, or takes it over when free, expired, or already held by the same holder
-- (reentrant: token kept, hold_count + 1; expired same holder: a new acquisition, token + 1).
-- ON CONFLICT never raises a duplicate-key error. When nothing is acquired, the second branch
-- reports the holder and milliseconds left from the statement's snapshot.
-- Fast path: when the snapshot shows the lease held live by another holder, the INSERT's row
-- source is empty, so the statement touches no row: no row lock, no transaction id, no WAL flush at
-- commit (a failed acquire under contention costs a read). The ON CONFLICT WHERE below still
-- decides whenever a row is proposed (a row that changed after the snapshot), so the NOT EXISTS
-- is only an optimization, never the guard.
-- The commit is durable even where the server's default is synchronous_commit = off (then
-- 'local' for this statement's transaction only): a token lost in a crash could be handed out again.
-- Columns: acquired, token, hold_count, holder_id, ms_left.
WITH durable AS (
  SELECT CASE WHEN current_setting('synchronous_commit') = 'off'
              THEN set_config('synchronous_commit', 'local', true) END AS sync
), prev AS (
  SELECT holder_id, expires_at FROM {{locks}} WHERE name = $1
), up AS (
  INSERT INTO {{locks}} AS l (name, holder_id, token, hold_count, acquired_at, expires_at)
  SELECT $1, $2, 1, 1, clock_timestamp(), clock_timestamp() + $3::bigint * interval '1 millisecond'
  WHERE NOT EXISTS (SELECT 1 FROM prev WHERE prev.holder_id <> $2 AND prev.expires_at > clock_timestamp())
  ON CONFLICT (name) DO UPDATE SET
    token = CASE WHEN l.holder_id = excluded.holder_id AND l.expires_at > excluded.acquired_at
                 THEN l.token ELSE l.token + 1 END,
    hold_count = CASE WHEN l.holder_id = excluded.holder_id AND l.expires_at > excluded.acquired_at
                      THEN l.hold_count + 1 ELSE 1 END,
    acquired_at = CASE WHEN l.holder_id = excluded.holder_id AND l.expires_at > excluded.acquired_at
                       THEN l.acquired_at ELSE excluded.acquired_at END,
    expires_at = CASE WHEN l.holder_id = excluded.holder_id AND l.expires_at > excluded.acquired_at
                      THEN greatest(l.expires_at, excluded.expires_at) ELSE excluded.expires_at END,
    holder_id = excluded.holder_id
  WHERE l.holder_id IS NULL OR l.expires_at <= excluded.acquired_at OR l.holder_id = excluded.holder_id
  RETURNING l.token, l.hold_count
)
SELECT true AS acquired, up.token, up.hold_count, NULL::text AS holder_id, NULL::bigint AS ms_left
FROM up CROSS JOIN durable
UNION ALL
SELECT false, NULL, NULL, prev.holder_id,
       floor(extract(epoch FROM (prev.expires_at - clock_timestamp())) * 1000)::bigint
FROM prev
WHERE NOT EXISTS (SELECT 1 FROM up)
