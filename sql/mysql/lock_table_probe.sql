-- Is the lock table there? (error 1146 when it was dropped: migrate then creates it again even
-- though the version table says it is up to date)
SELECT COUNT(*) FROM {{locks}} WHERE 1 = 0
