-- Take NAME for HOLDER in one statement: a fresh, released or expired row is taken with a new
-- token; the same holder's live lease is re-entered (token kept, hold count + 1); a live lease of
-- another holder is left alone and nothing is returned.
-- ?1 name, ?2 holder, ?3 ttl in milliseconds
INSERT INTO {{locks}} AS l (name, holder_id, token, hold_count, acquired_at, expires_at)
VALUES (?1, ?2, 1, 1, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER), CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) + ?3)
ON CONFLICT (name) DO UPDATE SET
  token       = CASE WHEN l.holder_id = excluded.holder_id AND l.expires_at > excluded.acquired_at
                     THEN l.token ELSE l.token + 1 END,
  hold_count  = CASE WHEN l.holder_id = excluded.holder_id AND l.expires_at > excluded.acquired_at
                     THEN l.hold_count + 1 ELSE 1 END,
  acquired_at = CASE WHEN l.holder_id = excluded.holder_id AND l.expires_at > excluded.acquired_at
                     THEN l.acquired_at ELSE excluded.acquired_at END,
  expires_at  = CASE WHEN l.holder_id = excluded.holder_id AND l.expires_at > excluded.expires_at
                     THEN l.expires_at ELSE excluded.expires_at END,
  holder_id   = excluded.holder_id
WHERE l.holder_id IS NULL OR l.expires_at <= excluded.acquired_at OR l.holder_id = excluded.holder_id
RETURNING token, hold_count
