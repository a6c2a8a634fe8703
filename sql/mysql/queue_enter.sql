-- A fair waiter's ticket (see sql/postgresql/queue_poll.sql): name, owner id, holder label, ticket
-- ttl in milliseconds (twice). Takes the ticket, or pushes its expiry to now + ttl.
INSERT INTO {{locks_queue}} (name, owner, holder_id, ttl_ms, enqueued_at, expires_at)
VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? * 1000 MICROSECOND)
ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at)
