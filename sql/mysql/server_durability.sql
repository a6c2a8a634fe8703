-- Once per connection: the settings that decide whether a commit survives a crash (sqllock
-- refuses lazy ones unless the user accepts the risk). SHOW VARIABLES, because wsrep_on exists
-- only on MariaDB and an unknown @@variable is an error. wsrep_provider_options (Galera): whether
-- pc.ignore_sb or pc.ignore_quorum let a minority of a partitioned cluster go on writing. read_only:
-- a replica, where a lock (taken by an account allowed to write there) is not seen by the primary.
SHOW GLOBAL VARIABLES WHERE Variable_name IN ('innodb_flush_log_at_trx_commit', 'sync_binlog', 'log_bin', 'wsrep_on',
                                              'wsrep_provider_options', 'read_only')
