-- Waiter connection, after its GET_LOCK on a holder's wake-up key answered 1: the watched row's
-- state (token and whether it has a holder), so that one release is woken once although the
-- waiter connections of several clients, queued on the key, pass it to each other (each takes it
-- and lets it go at once). A hint only, read without a causality wait. Parameter: name.
SELECT CONCAT(token, IF(holder_id IS NULL, ' free', ' held')) FROM {{locks}} WHERE name = ?
