-- Which items of a renew batch passed the owner check (read only when the update's row count
-- does not already say that all did). Parameter: the same JSON array as lease_renew.
SELECT r.i
FROM JSON_TABLE(?, '$[*]' COLUMNS (
       i BIGINT PATH '$.i',
       n VARCHAR(1022) PATH '$.n',
       o VARCHAR(160) PATH '$.o',
       t BIGINT PATH '$.t')) AS r
JOIN {{locks}} AS l ON l.name = UNHEX(r.n) AND l.owner = UNHEX(r.o) AND l.token = r.t
WHERE l.holder_id IS NOT NULL AND l.expires_at > UTC_TIMESTAMP(6)
