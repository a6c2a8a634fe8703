-- Part "acquire_conflict" (the end of an acquire's upsert, after the token it gives a new
-- acquisition; shared by lease_acquire.sql and lease_acquire_fenced.sql, whose INSERT is aliased
-- l): the row is taken when it is free, expired, or already this owner's (the same acquire call
-- sent again after its answer was lost: acquired_at kept, expiry never shortened); a live lease
-- of anyone else is left alone and nothing is returned.
acquired_at = CASE WHEN l.owner = excluded.owner AND l.expires_at > excluded.acquired_at
                       THEN l.acquired_at ELSE excluded.acquired_at END,
    expires_at = CASE WHEN l.owner = excluded.owner AND l.expires_at > excluded.acquired_at
                      THEN greatest(l.expires_at, excluded.expires_at) ELSE excluded.expires_at END,
    holder_id = excluded.holder_id,
    owner = excluded.owner,
    hold_count = 1
  WHERE l.holder_id IS NULL OR l.expires_at <= excluded.acquired_at OR l.owner = excluded.owner
  RETURNING l.token
