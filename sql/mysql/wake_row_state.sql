-- Waiter connection, after its GET_LOCK on a holder's wake-up key answered 1: the watched row's
-- state (token and whether it has a holder), so that one release is woken once although the
-- waiter connections of several clients, queued on the key, pass it to each other (each takes it
-- and lets it go at once); and, in the same round trip, the key let go again (second column,
-- RELEASE_LOCK). The next waiter connection queued on the key waits one round trip per pass
-- instead of two. The row is read after the GET_LOCK returned, so after the commit of the release
-- that let the key go (its holder commits before it lets the key go). A hint only, read without
-- a causality wait. Parameters: name, key.
SELECT (SELECT CONCAT(token, IF(holder_id IS NULL, ' free', ' held')) FROM {{locks}} WHERE name = ?),
       RELEASE_LOCK(CONCAT('sqllock:', SHA1(?)))
