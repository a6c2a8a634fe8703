-- Bound row-lock waits of the next transactions on this connection. Parameter: whole seconds.
SET SESSION innodb_lock_wait_timeout = ?
