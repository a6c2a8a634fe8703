-- Where a fair waiter stands: ?1 name, ?2 its ticket's seq, ?3 its owner id. Columns: the number
-- of live tickets ahead of it (the live holder's own ticket not counted), and whether the lock row
-- is already this owner's live lease (handed over by fair_release.sql).
SELECT (SELECT count(*) FROM {{locks_queue}} AS q
        WHERE q.name = ?1 AND q.seq < ?2 AND q.expires_at > sqllock_now_ms()
          AND q.owner IS NOT (SELECT owner FROM {{locks}}
                              WHERE name = ?1 AND holder_id IS NOT NULL AND expires_at > sqllock_now_ms())),
       EXISTS (SELECT 1 FROM {{locks}}
               WHERE name = ?1 AND owner = ?3 AND holder_id IS NOT NULL AND expires_at > sqllock_now_ms())
