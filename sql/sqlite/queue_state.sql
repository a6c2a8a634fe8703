-- Where a fair waiter stands: ?1 name, ?2 its ticket's seq, ?3 its owner id. Columns: the number
-- of live tickets ahead of it (the live holder's own ticket not counted), whether the lock row
-- is already this owner's live lease (handed over by fair_release.sql), and if so (else NULL) its
-- token and milliseconds left: a handed-over lease is taken from this read, committing nothing
-- (the hand-over committed the token).
SELECT (SELECT count(*) FROM {{locks_queue}} AS q
        WHERE q.name = ?1 AND q.seq < ?2 AND q.expires_at > sqllock_now_ms()
          AND q.owner IS NOT (SELECT owner FROM {{locks}}
                              WHERE name = ?1 AND holder_id IS NOT NULL AND expires_at > sqllock_now_ms())),
       EXISTS (SELECT 1 FROM {{locks}}
               WHERE name = ?1 AND owner = ?3 AND holder_id IS NOT NULL AND expires_at > sqllock_now_ms()),
       m.token, m.expires_at - sqllock_now_ms()
FROM (SELECT 1) LEFT JOIN (SELECT token, expires_at FROM {{locks}}
                           WHERE name = ?1 AND owner = ?3 AND holder_id IS NOT NULL
                             AND expires_at > sqllock_now_ms()) AS m ON 1
