-- Renew a batch of leases in one statement. Parameter: a JSON array of
-- {"i": index, "n": hex(name), "o": hex(owner), "t": token, "us": ttl in microseconds}
-- (hex, so that any bytes travel through JSON unharmed; one item per name). Only rows whose name,
-- owner and token all match and whose lease has not expired are extended: the owner check. The
-- expiry is never shortened (a re-entered lease with a shorter TTL must not cut the outer one).
-- The join reaches each row through the primary key.
UPDATE {{locks}} AS l
JOIN JSON_TABLE(?, '$[*]' COLUMNS (
       n VARCHAR(1022) PATH '$.n',
       o VARCHAR(160) PATH '$.o',
       t BIGINT PATH '$.t',
       us BIGINT PATH '$.us')) AS r
  ON l.name = UNHEX(r.n) AND l.owner = UNHEX(r.o) AND l.token = r.t
SET l.expires_at = GREATEST(l.expires_at, UTC_TIMESTAMP(6) + INTERVAL r.us MICROSECOND)
WHERE l.holder_id IS NOT NULL AND l.expires_at > UTC_TIMESTAMP(6)
