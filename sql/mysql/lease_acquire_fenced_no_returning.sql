-- MySQL 8 (no INSERT ... RETURNING): lease_acquire_fenced.sql without its RETURNING; the result is
-- read by lease_acquire_result. Parameters: name, holder label, owner id, the new token, ttl_us.
{{part:acquire_fenced_upsert}}
