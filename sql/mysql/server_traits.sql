-- Once per connection: server flavour, whether a lock wait timeout rolls back the whole
-- transaction, and the current database.
SELECT VERSION(), @@innodb_rollback_on_timeout, DATABASE()
