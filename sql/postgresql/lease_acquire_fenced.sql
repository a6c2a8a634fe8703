-- lease_acquire.sql for a reader-writer row (rw_name.hpp), in one statement: a new acquisition's
-- token comes from the name's fence row instead of the row's own token + 1. The fence is a row of
-- the lock table without holder, never a lease; every acquisition of the name's read or write lock
-- advances it by one (and to at least the timeline's first token, as lease_acquire.sql) and takes
-- its value, so readers and writers of the name share one increasing sequence: a reader row
-- belongs to one client and scope, and its own sequence would start low again. Created on first
-- use above every token the name's rows had before it.
-- $1 row name, $2 holder label, $3 owner id, $4 ttl ms, $5 fence row name, $6 $7 the range
-- [lo, hi) of every row of the name.
-- Lock order: the fence row first (the takeover's FOR UPDATE waits for it: its WHERE reads
-- `fence`), then the lease row, in every acquire of the name; renewals and releases lock lease
-- rows only, so acquirers never wait for each other crosswise.
-- Fast path as lease_acquire.sql: when the snapshot shows the row held live by another owner,
-- nothing is written, the fence included. A row that changed after the snapshot is still decided
-- by the ON CONFLICT WHERE (the fence then advanced for nothing: a token skipped, never reused).
-- This very owner's live row (the same acquire sent again after a lost answer) keeps its token.
-- Columns: acquired, token, holder_id, ms_left.
WITH {{part:epoch}}, {{part:durable}}, prev AS (
  SELECT holder_id, owner, expires_at FROM {{locks}} WHERE name = $1
), fence AS (
  INSERT INTO {{locks}} AS f (name, holder_id, owner, token, hold_count, acquired_at, expires_at)
  SELECT $5, NULL, NULL,
         greatest(epoch.first_token,
                  CASE WHEN EXISTS (SELECT 1 FROM {{locks}} WHERE name = $5) THEN 0
                       ELSE coalesce((SELECT max(token) FROM {{locks}} WHERE name >= $6 AND name < $7), 0) + 1 END),
         0, NULL, NULL
  FROM epoch
  WHERE NOT EXISTS (SELECT 1 FROM prev
                    WHERE prev.holder_id IS NOT NULL AND prev.owner IS DISTINCT FROM $3
                      AND prev.expires_at > clock_timestamp())
  ON CONFLICT (name) DO UPDATE SET token = greatest(f.token + 1, excluded.token)
  RETURNING f.token
), takeover AS (
  -- As lease_acquire.sql: a free or expired row is locked FOR UPDATE before it is taken (waiting
  -- for the transactions guarding the old lease), here only once the fence is locked.
  SELECT count(*) AS locked FROM (
    SELECT 1 FROM {{locks}}
    WHERE name = $1 AND (holder_id IS NULL OR expires_at <= clock_timestamp()) AND owner IS DISTINCT FROM $3
      AND EXISTS (SELECT 1 FROM fence)
    FOR UPDATE
  ) AS candidate
), up AS (
  INSERT INTO {{locks}} AS l (name, holder_id, owner, token, hold_count, acquired_at, expires_at)
  SELECT $1, $2, $3, fence.token, 1, clock_timestamp(), clock_timestamp() + $4::bigint * interval '1 millisecond'
  FROM fence CROSS JOIN takeover
  ON CONFLICT (name) DO UPDATE SET
    token = CASE WHEN l.owner = excluded.owner AND l.expires_at > excluded.acquired_at
                 THEN l.token ELSE excluded.token END,
    {{part:acquire_conflict}}
)
{{part:acquire_answer}}
