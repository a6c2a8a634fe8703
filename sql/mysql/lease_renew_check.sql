-- Which items of a renew batch passed the owner check (read only when the update's row count
-- does not already say that all did). Parameter: the same JSON array as lease_renew.
SELECT r.i
FROM JSON_TABLE(?, '$[*]' COLUMNS (
       i BIGINT PATH '$.i',
       n VARBINARY(255) PATH '$.n',
       h VARBINARY(512) PATH '$.h',
       t BIGINT PATH '$.t')) AS r
JOIN {{locks}} AS l ON l.name = r.n AND l.holder_id = r.h AND l.token = r.t
WHERE l.hold_count > 0
