-- The live tickets of every name (see sql/postgresql/queue_list.sql).
-- Columns: name, holder_id, seq, waited_ms, ms_left.
SELECT q.name, q.holder_id, q.seq,
       TIMESTAMPDIFF(MICROSECOND, q.enqueued_at, UTC_TIMESTAMP(6)) DIV 1000,
       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), q.expires_at) DIV 1000
FROM {{locks_queue}} AS q
WHERE q.expires_at > UTC_TIMESTAMP(6)
  AND NOT EXISTS (SELECT 1 FROM {{locks}} AS l
                  WHERE l.name = q.name AND l.owner = q.owner AND l.holder_id IS NOT NULL
                    AND l.expires_at > UTC_TIMESTAMP(6))
ORDER BY q.name, q.seq
