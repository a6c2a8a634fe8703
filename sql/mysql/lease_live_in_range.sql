-- The live lease in the name range [?, ?) that ends last, if any (a reader-writer lease's readers:
-- their rows share a prefix; the name column is VARBINARY, so the range is bytewise and uses the
-- primary key). A consistent read in its own autocommit statement: its read view is made when it
-- starts, so it sees every acquisition committed before. Same columns as lease_inspect.
SELECT {{part:lock_info}}
FROM {{locks}}
WHERE name >= ? AND name < ? AND holder_id IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)
ORDER BY expires_at DESC
LIMIT 1
