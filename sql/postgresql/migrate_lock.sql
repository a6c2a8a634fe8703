-- Serialize migrations of one lock table across processes until the transaction ends: $1 key.
SELECT pg_advisory_xact_lock($1::bigint)
