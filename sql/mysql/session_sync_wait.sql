-- Lease connections to a Galera node: reads (lease_inspect, lease_list, lease_renew_check, the
-- semaphore count) wait until this node has applied every write set the cluster committed before
-- them (causality check, wsrep_sync_wait bit 1 = SELECT/SHOW/BEGIN), so `status` on one node shows
-- an acquisition made on another one. Writes need no wait: certification rejects a write based on
-- a stale row (error 1213, handled as "not acquired, try again").
SET SESSION wsrep_sync_wait = 1
