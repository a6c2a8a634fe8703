-- Renew a batch of leases in one statement: parallel arrays $1 names, $2 holders, $3 tokens,
-- $4 ttls in milliseconds (each (name, holder, token) at most once). Owner-checked: a row is
-- extended only where name, holder and token all match. Returns the 1-based index of each match.
-- Durable even where the server's default is synchronous_commit = off (see lease_acquire).
WITH durable AS (
  SELECT CASE WHEN current_setting('synchronous_commit') = 'off'
              THEN set_config('synchronous_commit', 'local', true) END AS sync
)
UPDATE {{locks}} AS l
SET expires_at = clock_timestamp() + i.ttl_ms * interval '1 millisecond'
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
     WITH ORDINALITY AS i(name, holder_id, token, ttl_ms, idx)
     CROSS JOIN durable
WHERE l.name = i.name AND l.holder_id = i.holder_id AND l.token = i.token AND l.hold_count > 0
RETURNING i.idx
