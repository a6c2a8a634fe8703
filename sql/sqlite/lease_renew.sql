-- Renew a batch of leases in one statement: only rows whose name, owner id and token all match and
-- whose lease has not expired; the expiry is never shortened. Returns the names renewed (one item
-- per name in a batch). ?1 JSON array of [name, owner, token, ttl_ms]
UPDATE {{locks}} AS l
SET expires_at = max(l.expires_at, j.now + j.ttl)
FROM (SELECT json_extract(value, '$[0]') AS name, json_extract(value, '$[1]') AS owner,
             json_extract(value, '$[2]') AS token, json_extract(value, '$[3]') AS ttl,
             sqllock_now_ms() AS now
      FROM json_each(?1)) AS j
WHERE l.name = j.name AND l.owner = j.owner AND l.token = j.token AND l.holder_id IS NOT NULL
  AND l.expires_at > j.now
RETURNING name
