-- The live tickets of every name (see sql/postgresql/queue_list.sql).
-- Columns: name, holder_id, seq, waited_ms, ms_left.
SELECT q.name, q.holder_id, q.seq, sqllock_now_ms() - q.enqueued_at, q.expires_at - sqllock_now_ms()
FROM {{locks_queue}} AS q
WHERE q.expires_at > sqllock_now_ms()
  AND NOT EXISTS (SELECT 1 FROM {{locks}} AS l
                  WHERE l.name = q.name AND l.owner = q.owner AND l.holder_id IS NOT NULL
                    AND l.expires_at > sqllock_now_ms())
ORDER BY q.name, q.seq
