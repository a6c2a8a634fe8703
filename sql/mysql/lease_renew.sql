-- Renew a batch of leases in one statement. Parameter: a JSON array of
-- {"i": index, "n": hex(name), "h": hex(holder), "t": token, "us": ttl in microseconds}
-- (hex, so that any bytes travel through JSON unharmed). Only rows whose name, holder and token
-- all match are extended: the owner check. The join reaches each row through the primary key.
UPDATE {{locks}} AS l
JOIN JSON_TABLE(?, '$[*]' COLUMNS (
       n VARCHAR(510) PATH '$.n',
       h VARCHAR(1024) PATH '$.h',
       t BIGINT PATH '$.t',
       us BIGINT PATH '$.us')) AS r
  ON l.name = UNHEX(r.n) AND l.holder_id = UNHEX(r.h) AND l.token = r.t
SET l.expires_at = UTC_TIMESTAMP(6) + INTERVAL r.us MICROSECOND
WHERE l.hold_count > 0
