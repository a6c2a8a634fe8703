-- A fair waiter's poll: $1 name, $2 holder label, $3 owner id (the acquire call's), $4 ticket ttl in
-- milliseconds. Takes the waiter's ticket (first poll) or pushes its expiry to now + ttl (later
-- polls): a waiter that stops polling (dead, stopped) loses its place after ttl. Expired tickets of
-- the name older than 10 s are deleted on the way. Answers the ticket's seq, how many live tickets
-- are ahead of it (the live holder's own ticket not counted), and whether the lock row is already
-- this owner's live lease (handed over by fair_release.sql).
-- Columns: seq, ahead, mine.
WITH t AS (
  SELECT clock_timestamp() AS now
), prune AS (
  DELETE FROM {{locks_queue}} AS q USING t
  WHERE q.name = $1 AND q.expires_at <= t.now - interval '10 seconds' AND q.owner <> $3
), ticket AS (
  INSERT INTO {{locks_queue}} AS q (name, owner, holder_id, ttl_ms, enqueued_at, expires_at)
  SELECT $1, $3, $2, $4::bigint, t.now, t.now + $4::bigint * interval '1 millisecond' FROM t
  ON CONFLICT (owner) DO UPDATE SET expires_at = excluded.expires_at
  RETURNING q.seq
), holder AS (
  SELECT l.owner FROM {{locks}} AS l CROSS JOIN t
  WHERE l.name = $1 AND l.holder_id IS NOT NULL AND l.expires_at > t.now
)
SELECT ticket.seq,
       (SELECT count(*) FROM {{locks_queue}} AS q CROSS JOIN t
        WHERE q.name = $1 AND q.seq < ticket.seq AND q.expires_at > t.now
          AND q.owner IS DISTINCT FROM (SELECT owner FROM holder)) AS ahead,
       EXISTS (SELECT 1 FROM holder WHERE holder.owner = $3) AS mine
FROM ticket
