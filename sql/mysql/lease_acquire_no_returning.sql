-- MySQL 8 (no INSERT ... RETURNING): the acquire of lease_acquire.sql without its RETURNING; the
-- result is read by lease_acquire_result. Parameters: name, holder label, owner id, ttl_us.
{{part:acquire_upsert}}
