-- Administrative release whoever holds it: $1 name, $2 notification channel of the name, or NULL
-- for no notification (client_options::notifications off).
-- The token stays, so the next acquisition still gets a greater one. Returns a row if it was held.
WITH u AS (
  UPDATE {{locks}}
  SET holder_id = NULL, owner = NULL, hold_count = 0, expires_at = clock_timestamp()
  WHERE name = $1 AND holder_id IS NOT NULL
  RETURNING name
)
SELECT u.name,
       CASE WHEN $2::text IS NOT NULL THEN pg_notify($2::text, u.name) END::text AS notified
FROM u
