-- Renew a batch of leases in one statement; only rows whose name, holder and token all match.
-- ?1 JSON array of [name, holder, token, ttl_ms]
UPDATE {{locks}} AS l
SET expires_at = sqllock_now_ms() + j.ttl
FROM (SELECT json_extract(value, '$[0]') AS name, json_extract(value, '$[1]') AS holder,
             json_extract(value, '$[2]') AS token, json_extract(value, '$[3]') AS ttl
      FROM json_each(?1)) AS j
WHERE l.name = j.name AND l.holder_id = j.holder AND l.token = j.token
RETURNING name, token
