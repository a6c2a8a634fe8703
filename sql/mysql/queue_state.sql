-- Where a fair waiter stands: its owner id. Columns: its ticket's seq, the number of live tickets
-- ahead of it (the live holder's own ticket not counted), whether the lock row is already this
-- owner's live lease (handed over by fair_release.sql), and the lock row's state as in
-- wake_row_state.sql (the waker counts the releases after this answer from it; NULL when the name
-- has no lock row yet, counted from as "none"); then, when the row is this owner's live lease (else
-- NULL), its token and microseconds left (server clock): a lease handed over is taken from this
-- read, committing nothing (the hand-over committed the token durably); and with it the holder's
-- wake-up lock, as an acquire takes it (1: taken, 0: still busy after the wait; NULL: not asked or
-- not handed over). Parameters: take_wake_lock (0/1), wake key, seconds to wait for it, owner id.
-- No row: the ticket is gone.
SELECT q.seq,
       (SELECT count(*) FROM {{locks_queue}} AS a
        WHERE a.name = q.name AND a.seq < q.seq AND a.expires_at > UTC_TIMESTAMP(6)
          AND NOT (a.owner <=> (SELECT l.owner FROM {{locks}} AS l
                                WHERE l.name = q.name AND l.holder_id IS NOT NULL
                                  AND l.expires_at > UTC_TIMESTAMP(6)))),
       m.token IS NOT NULL,
       (SELECT CONCAT(l.token, IF(l.holder_id IS NULL, ' free', ' held')) FROM {{locks}} AS l
        WHERE l.name = q.name),
       m.token,
       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), m.expires_at),
       IF(m.token IS NOT NULL AND ? = 1, GET_LOCK(CONCAT('sqllock:', SHA1(?)), ?), NULL)
FROM {{locks_queue}} AS q
LEFT JOIN {{locks}} AS m
  ON m.name = q.name AND m.owner = q.owner AND m.holder_id IS NOT NULL AND m.expires_at > UTC_TIMESTAMP(6)
WHERE q.owner = ?
