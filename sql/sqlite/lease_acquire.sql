-- Take NAME for HOLDER in one statement: a fresh, released or expired row is taken with a new
-- token; the same holder's live lease is re-entered (token kept, hold count + 1); a live lease of
-- another holder is left alone and nothing is returned.
-- ?1 name, ?2 holder, ?3 ttl in milliseconds
-- sqllock_now_ms() is registered by sqllock on its connections: the kernel's real-time clock in
-- milliseconds, read by a raw system call so that every process on the machine agrees on it even
-- when one runs under a clock-shifting preload such as libfaketime.
INSERT INTO {{locks}} AS l (name, holder_id, token, hold_count, acquired_at, expires_at)
VALUES (?1, ?2, 1, 1, sqllock_now_ms(), sqllock_now_ms() + ?3)
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
