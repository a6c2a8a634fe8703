-- Release of a fair lease, with hand-over (see sql/postgresql/fair_release.sql): ?1 name, ?2 owner
-- id, ?3 token (0: any). Owner-checked. When the name has a live ticket of another owner the row
-- goes to the lowest one in this statement (token + 1, lease ending the ticket's ttl_ms from now);
-- otherwise it is freed. Every expression sees the row as it was. Column: the new hold count (0 when
-- freed); no row when the owner check failed. queue_leave.sql then deletes the releaser's ticket.
UPDATE {{locks}} AS l
SET holder_id   = n.holder_id,
    owner       = n.owner,
    token       = CASE WHEN n.owner IS NULL THEN l.token ELSE l.token + 1 END,
    hold_count  = CASE WHEN n.owner IS NULL THEN 0 ELSE 1 END,
    acquired_at = CASE WHEN n.owner IS NULL THEN l.acquired_at ELSE sqllock_now_ms() END,
    expires_at  = CASE WHEN n.owner IS NULL THEN sqllock_now_ms() ELSE sqllock_now_ms() + n.ttl_ms END
FROM (SELECT NULL AS one) AS anchor
LEFT JOIN (SELECT q.owner, q.holder_id, q.ttl_ms FROM {{locks_queue}} AS q
           WHERE q.name = ?1 AND q.owner <> ?2 AND q.expires_at > sqllock_now_ms()
           ORDER BY q.seq LIMIT 1) AS n ON 1
WHERE l.name = ?1 AND l.owner = ?2 AND (?3 = 0 OR l.token = ?3) AND l.holder_id IS NOT NULL
RETURNING hold_count
