-- The live tickets of every name (fair waiters), by name and seq; a ticket whose owner holds the
-- lock already is not a waiter. Columns: name, holder_id, seq, waited_ms, ms_left.
WITH t AS (SELECT clock_timestamp() AS now)
SELECT q.name, q.holder_id, q.seq,
       floor(extract(epoch FROM (t.now - q.enqueued_at)) * 1000)::bigint AS waited_ms,
       floor(extract(epoch FROM (q.expires_at - t.now)) * 1000)::bigint AS ms_left
FROM {{locks_queue}} AS q CROSS JOIN t
WHERE q.expires_at > t.now
  AND NOT EXISTS (SELECT 1 FROM {{locks}} AS l
                  WHERE l.name = q.name AND l.owner = q.owner AND l.holder_id IS NOT NULL AND l.expires_at > t.now)
ORDER BY q.name, q.seq
