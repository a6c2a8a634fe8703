-- Part "guard_key" (two arguments): the key of the transaction-scoped advisory lock by which a
-- guard marks the row of lease $1 while its transaction is open (lease_guard.sql, shared), and a
-- release of a reader-writer row finds it (lease_release.sql, tried exclusively). Two int4 keys,
-- a key space apart from single bigint keys (migrate_lock.sql): 1936288875 ('sqlk') and the hash
-- of the row's name.
1936288875, hashtext($1::text)
