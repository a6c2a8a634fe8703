-- Where a fair waiter stands: its owner id. Columns: its ticket's seq, the number of live tickets
-- ahead of it (the live holder's own ticket not counted), whether the lock row is already this
-- owner's live lease (handed over by fair_release.sql), and the lock row's state as in
-- wake_row_state.sql (the waker counts the releases after this answer from it; NULL when the name
-- has no lock row yet, counted from as "none"). No row: the ticket is gone.
SELECT q.seq,
       (SELECT count(*) FROM {{locks_queue}} AS a
        WHERE a.name = q.name AND a.seq < q.seq AND a.expires_at > UTC_TIMESTAMP(6)
          AND NOT (a.owner <=> (SELECT l.owner FROM {{locks}} AS l
                                WHERE l.name = q.name AND l.holder_id IS NOT NULL
                                  AND l.expires_at > UTC_TIMESTAMP(6)))),
       EXISTS (SELECT 1 FROM {{locks}} AS l
               WHERE l.name = q.name AND l.owner = q.owner AND l.holder_id IS NOT NULL
                 AND l.expires_at > UTC_TIMESTAMP(6)),
       (SELECT CONCAT(l.token, IF(l.holder_id IS NULL, ' free', ' held')) FROM {{locks}} AS l
        WHERE l.name = q.name)
FROM {{locks_queue}} AS q
WHERE q.owner = ?
