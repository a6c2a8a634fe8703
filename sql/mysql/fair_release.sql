-- Release of a fair lease, with hand-over (see sql/postgresql/fair_release.sql): name, owner id
-- (for the next ticket), then name, owner id, token, token (0: any) for the owner check. When the
-- name has a live ticket of another owner the row goes to the lowest one in this statement
-- (token + 1, lease ending the ticket's ttl_ms from now); otherwise it is freed. No assignment
-- reads a column another one sets, so the order of a multi-table UPDATE's assignments does not
-- matter. Affected rows: 1 when the owner check passed. queue_leave.sql has deleted the releaser's
-- ticket just before (mysql_backend.cpp, fair_release_on: the statement that cannot run twice goes last).
UPDATE {{locks}} AS l
LEFT JOIN (SELECT q.owner, q.holder_id, q.ttl_ms FROM {{locks_queue}} AS q
           WHERE q.name = ? AND q.owner <> ? AND q.expires_at > UTC_TIMESTAMP(6)
           ORDER BY q.seq LIMIT 1) AS n ON 1 = 1
SET l.token = IF(n.owner IS NULL, l.token, l.token + 1),
    l.hold_count = IF(n.owner IS NULL, 0, 1),
    l.acquired_at = IF(n.owner IS NULL, l.acquired_at, UTC_TIMESTAMP(6)),
    l.expires_at = IF(n.owner IS NULL, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL n.ttl_ms * 1000 MICROSECOND),
    l.holder_id = n.holder_id,
    l.owner = n.owner
WHERE l.name = ? AND l.owner = ? AND (? = 0 OR l.token = ?) AND l.holder_id IS NOT NULL
