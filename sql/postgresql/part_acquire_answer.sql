-- Part "acquire_answer" (the final query of lease_acquire.sql and lease_acquire_fenced.sql, over
-- their CTEs up, durable and prev): the token when up took the row (committed durably), else the
-- holder's label and its milliseconds left. Columns: acquired, token, holder_id, ms_left.
SELECT true AS acquired, up.token, NULL::text AS holder_id, NULL::bigint AS ms_left
FROM up CROSS JOIN durable
UNION ALL
SELECT false, NULL, prev.holder_id,
       floor(extract(epoch FROM (prev.expires_at - clock_timestamp())) * 1000)::bigint
FROM prev
WHERE NOT EXISTS (SELECT 1 FROM up)
