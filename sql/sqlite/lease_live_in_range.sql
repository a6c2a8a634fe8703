-- The live lease in the name range [?1, ?2) that ends last, if any (a reader-writer lease's readers:
-- their rows share a prefix; names compare bytewise, BINARY collation). Same columns as lease_inspect.
SELECT {{part:lock_info}}
FROM {{locks}}
WHERE name >= ?1 AND name < ?2 AND holder_id IS NOT NULL AND expires_at > sqllock_now_ms()
ORDER BY expires_at DESC
LIMIT 1
