-- Renew a batch of leases in one statement. Parameter: a JSON array of
-- {"i": index, "n": name, "h": holder, "t": token, "us": ttl in microseconds}.
-- Only rows whose name, holder and token all match are extended (the owner check).
UPDATE {{locks}} AS l
JOIN JSON_TABLE(?, '$[*]' COLUMNS (
       n VARBINARY(255) PATH '$.n',
       h VARBINARY(512) PATH '$.h',
       t BIGINT PATH '$.t',
       us BIGINT PATH '$.us')) AS r
  ON l.name = r.n AND l.holder_id = r.h AND l.token = r.t
SET l.expires_at = UTC_TIMESTAMP(6) + INTERVAL r.us MICROSECOND
WHERE l.hold_count > 0
