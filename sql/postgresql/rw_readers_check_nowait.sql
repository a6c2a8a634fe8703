-- rw_readers_check without waiting: the writer's look at the name's readers, sent first. It
-- answers in one statement when no reader row is locked. SKIP LOCKED rather than NOWAIT, so that
-- meeting a row lock (a guard, a renewal, a reader's check) is an answer, not an ERROR line in the
-- server's log: the first branch is the rows it could lock (their latest versions), the second the
-- rows as read that it could not (row_locked false). The backend then reports lock_not_available,
-- and the writer reads plainly and waits with rw_readers_check only when no reader is live.
-- $1, $2 the readers' name range [$1, $2).
WITH held AS (
  SELECT {{part:lock_info}}
  FROM {{locks}}
  WHERE name >= $1 AND name < $2 AND holder_id IS NOT NULL
  FOR UPDATE SKIP LOCKED
)
SELECT *, true AS row_locked FROM held
UNION ALL
SELECT {{part:lock_info}}, false
FROM {{locks}} AS l
WHERE name >= $1 AND name < $2 AND holder_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM held AS h WHERE h.name = l.name)
