-- Release of a fair lease, with hand-over (see sql/postgresql/fair_release.sql), and the end of the
-- releaser's own ticket, in one statement: owner id (its ticket), name, owner id (for the next
-- ticket), then name, owner id, token, token (0: any) for the owner check. When the name has a
-- live ticket of another owner the row goes to the lowest one in this statement (token + 1, lease
-- ending the ticket's ttl_ms from now); otherwise it is freed. The releaser's ticket is expired
-- (every reader of the queue skips expired tickets; queue_prune.sql deletes it later) in the same
-- statement, so no waiter can count it or be handed the lock for it after the hand-over. No
-- assignment reads a column another one sets, so the order of a multi-table UPDATE's assignments
-- does not matter. Affected rows: at least 1 when the owner check passed (the ticket is only
-- touched then). A caller that holds no lease (a waiter giving up) changes nothing here:
-- mysql_backend.cpp (fair_release_on) then deletes its ticket (queue_leave.sql) and runs this
-- again, so that a hand-over that reached the ticket in between is passed on.
UPDATE {{locks}} AS l
LEFT JOIN {{locks_queue}} AS mine ON mine.owner = ?
LEFT JOIN (SELECT q.owner, q.holder_id, q.ttl_ms FROM {{locks_queue}} AS q
           WHERE q.name = ? AND q.owner <> ? AND q.expires_at > UTC_TIMESTAMP(6)
           ORDER BY q.seq LIMIT 1) AS n ON 1 = 1
SET l.token = IF(n.owner IS NULL, l.token, l.token + 1),
    l.hold_count = IF(n.owner IS NULL, 0, 1),
    l.acquired_at = IF(n.owner IS NULL, l.acquired_at, UTC_TIMESTAMP(6)),
    l.expires_at = IF(n.owner IS NULL, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL n.ttl_ms * 1000 MICROSECOND),
    l.holder_id = n.holder_id,
    l.owner = n.owner,
    mine.expires_at = '1970-01-01 00:00:00'
WHERE l.name = ? AND l.owner = ? AND (? = 0 OR l.token = ?) AND l.holder_id IS NOT NULL
