-- Waiter connection on a Galera node (GET_LOCK is local to one node, so a holder on another node
-- cannot be waited on): is the watched lease free or expired now? One row (1) when it is; none
-- while it is held. A hint only (a wake-up makes the waiter try its acquire): read without a
-- causality wait. Parameter: name.
SELECT 1 FROM {{locks}} WHERE name = ? AND (holder_id IS NULL OR expires_at <= UTC_TIMESTAMP(6))
