-- Take NAME in one statement: a fresh, released or expired row is taken with a new token (token + 1);
-- the row of this very owner id, still live (the same acquire call sent again after a lost answer),
-- is returned as it is (same token, expiry never shortened); a live lease of anyone else, whatever
-- their label, is left alone and nothing is returned. Re-entry is the client's bookkeeping.
-- An upsert's SET expressions all read the old row.
-- ?1 name, ?2 holder label, ?3 owner id, ?4 ttl in milliseconds
-- sqllock_now_ms() is registered by sqllock on its connections: the kernel's real-time clock in
-- milliseconds, read by a raw system call so that every process on the machine agrees on it even
-- when one runs under a clock-shifting preload such as libfaketime.
INSERT INTO {{locks}} AS l (name, holder_id, owner, token, hold_count, acquired_at, expires_at)
VALUES (?1, ?2, ?3, 1, 1, sqllock_now_ms(), sqllock_now_ms() + ?4)
ON CONFLICT (name) DO UPDATE SET
  token       = CASE WHEN l.owner IS excluded.owner AND l.expires_at > excluded.acquired_at
                     THEN l.token ELSE l.token + 1 END,
  {{part:acquire_conflict}}
