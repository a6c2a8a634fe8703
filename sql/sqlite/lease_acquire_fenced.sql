-- lease_acquire.sql for a reader-writer row: a new acquisition takes ?5, the value fence_advance
-- just gave the name's fence in the same write transaction, instead of the row's own token + 1
-- (a reader row belongs to one client and scope; its own sequence would start low again). This
-- very owner's live row (an acquire sent again after a lost answer) keeps its token.
-- ?1 name, ?2 holder label, ?3 owner id, ?4 ttl in milliseconds, ?5 the new token
INSERT INTO {{locks}} AS l (name, holder_id, owner, token, hold_count, acquired_at, expires_at)
VALUES (?1, ?2, ?3, ?5, 1, sqllock_now_ms(), sqllock_now_ms() + ?4)
ON CONFLICT (name) DO UPDATE SET
  token       = CASE WHEN l.owner IS excluded.owner AND l.expires_at > excluded.acquired_at
                     THEN l.token ELSE excluded.token END,
  {{part:acquire_conflict}}
