-- Where a fair waiter stands, read only (between the renewals of queue_poll.sql): $1 owner id.
-- Columns: its ticket's seq, live tickets ahead of it (the live holder's own not counted),
-- whether the lock row is already this owner's live lease, and if so (else NULL) its token and
-- milliseconds left: a lease handed over by fair_release.sql is taken from this read, committing
-- nothing (the hand-over committed the token durably). No row: the ticket is gone.
WITH t AS (
  SELECT clock_timestamp() AS now
)
SELECT q.seq,
       (SELECT count(*) FROM {{locks_queue}} AS a
        WHERE a.name = q.name AND a.seq < q.seq AND a.expires_at > t.now
          AND a.owner IS DISTINCT FROM (SELECT l.owner FROM {{locks}} AS l
                                        WHERE l.name = q.name AND l.holder_id IS NOT NULL
                                          AND l.expires_at > t.now)) AS ahead,
       m.token IS NOT NULL AS mine,
       m.token,
       floor(extract(epoch FROM (m.expires_at - t.now)) * 1000)::bigint AS ms_left
FROM {{locks_queue}} AS q CROSS JOIN t
LEFT JOIN {{locks}} AS m
  ON m.name = q.name AND m.owner = q.owner AND m.holder_id IS NOT NULL AND m.expires_at > t.now
WHERE q.owner = $1
