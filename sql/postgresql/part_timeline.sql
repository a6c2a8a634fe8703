-- Part "timeline" (an expression): the server's timeline minus 1 (0 before any promotion),
-- read from the name of the current WAL file.
('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint - 1
