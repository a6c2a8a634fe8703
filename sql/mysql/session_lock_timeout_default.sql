-- Back to the server's row-lock wait bound.
SET SESSION innodb_lock_wait_timeout = DEFAULT
