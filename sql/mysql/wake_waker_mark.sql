-- Waiter connection, once when it connects: mark it as a waiter connection by a lock named after
-- its connection id, so that other waiter connections can tell it from a holder (wake_wait.sql).
SELECT GET_LOCK(CONCAT('sqllock-waker:', CONNECTION_ID()), 0)
