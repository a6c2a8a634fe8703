-- rw_readers_check without waiting: the writer's look at the name's readers, sent first. It
-- answers in one statement when no reader row is locked; a locked row (a guard, a renewal, a
-- reader's check) throws lock_not_available at once, and the writer then reads plainly and waits
-- with rw_readers_check only when no reader is live.
SELECT {{part:lock_info}}
FROM {{locks}}
WHERE name >= ? AND name < ? AND holder_id IS NOT NULL
FOR UPDATE NOWAIT
