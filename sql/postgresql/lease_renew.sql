-- Renew a batch of leases in one statement: parallel arrays $1 names, $2 owner ids, $3 tokens,
-- $4 ttls in milliseconds (one element per name). Owner-checked: a row is extended only where name,
-- owner and token all match and the lease has not expired (an expired lease may already be
-- someone else's by the rules of acquire). The expiry is never shortened (a re-entered lease with a
-- shorter TTL must not cut the outer one). Returns the 1-based index of each match.
-- Durable like lease_acquire. A lease whose token is of an earlier timeline (token >> 40 below
-- timeline - 1, see lease_acquire.sql) was granted by a primary before a failover: it is not
-- renewed (so reported lost), since what that primary granted may not have reached this one.
WITH epoch AS (
  SELECT {{part:timeline}} AS current
), {{part:durable}}
UPDATE {{locks}} AS l
SET expires_at = greatest(l.expires_at, clock_timestamp() + i.ttl_ms * interval '1 millisecond')
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
     WITH ORDINALITY AS i(name, owner, token, ttl_ms, idx)
     CROSS JOIN durable CROSS JOIN epoch
WHERE l.name = i.name AND l.owner = i.owner AND l.token = i.token AND l.holder_id IS NOT NULL
  AND l.expires_at > clock_timestamp() AND (l.token >> 40) >= epoch.current
RETURNING i.idx
