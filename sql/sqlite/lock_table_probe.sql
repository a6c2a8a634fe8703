-- Is the lock table there? (migrate creates a dropped one again even though the version table says
-- it is up to date)
SELECT 1 FROM {{locks}} LIMIT 0
