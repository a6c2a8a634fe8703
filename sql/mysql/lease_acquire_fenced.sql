-- lease_acquire.sql for a reader-writer row (rw_name.hpp), second in the acquire's transaction after
-- fence_advance: a new acquisition takes the fence's value (a bound parameter) instead of the
-- row's own token + 1, so readers and writers of the name share one increasing sequence (a reader
-- row belongs to one client and scope: its own sequence would start low again). This very owner's
-- live row (the same acquire sent again after a lost answer) keeps its token; anyone else's live
-- lease is left alone (the transaction is then rolled back, the fence's advance with it).
-- Parameters: name, holder label, owner id, the new token, ttl_us, then as lease_acquire: owner,
-- owner, take_wake_lock (0/1), wake key. MySQL 8 runs lease_acquire_fenced_no_returning, then
-- lease_acquire_result.
{{part:acquire_fenced_upsert}}
RETURNING owner <=> ?, token, holder_id,
  TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at),
  IF(owner <=> ? AND ? = 1, GET_LOCK(CONCAT('sqllock:', SHA1(?)), 0), NULL)
