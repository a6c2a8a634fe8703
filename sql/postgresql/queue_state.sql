-- Where a fair waiter stands, read only (between the renewals of queue_poll.sql): $1 owner id.
-- Columns: its ticket's seq, live tickets ahead of it (the live holder's own not counted), and
-- whether the lock row is already this owner's live lease. No row: the ticket is gone.
WITH t AS (
  SELECT clock_timestamp() AS now
)
SELECT q.seq,
       (SELECT count(*) FROM {{locks_queue}} AS a
        WHERE a.name = q.name AND a.seq < q.seq AND a.expires_at > t.now
          AND a.owner IS DISTINCT FROM (SELECT l.owner FROM {{locks}} AS l
                                        WHERE l.name = q.name AND l.holder_id IS NOT NULL
                                          AND l.expires_at > t.now)) AS ahead,
       EXISTS (SELECT 1 FROM {{locks}} AS l
               WHERE l.name = q.name AND l.owner = q.owner AND l.holder_id IS NOT NULL
                 AND l.expires_at > t.now) AS mine
FROM {{locks_queue}} AS q CROSS JOIN t
WHERE q.owner = $1
