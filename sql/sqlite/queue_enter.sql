-- A fair waiter's ticket (see sql/postgresql/queue_poll.sql): ?1 name, ?2 holder label, ?3 owner id,
-- ?4 ticket ttl in milliseconds. Takes the ticket, or pushes its expiry to now + ttl. Column: seq.
INSERT INTO {{locks_queue}} AS q (name, owner, holder_id, ttl_ms, enqueued_at, expires_at)
VALUES (?1, ?3, ?2, ?4, sqllock_now_ms(), sqllock_now_ms() + ?4)
ON CONFLICT (owner) DO UPDATE SET expires_at = excluded.expires_at
RETURNING seq
