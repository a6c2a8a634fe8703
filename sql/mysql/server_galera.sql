-- Once per connection to a Galera node (wsrep_on): how many nodes a commit is replicated to
-- before it is acknowledged (the primary component's size). With 2 or more, a commit survives the
-- crash of any one node, which is what lets sqllock accept innodb_flush_log_at_trx_commit = 2 there.
SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_size', 'wsrep_cluster_status')
