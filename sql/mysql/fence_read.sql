-- MySQL 8, after fence_advance_no_returning in the same transaction (which holds the fence row
-- locked): its value now. Parameter: the fence row name.
SELECT token FROM {{locks}} WHERE name = ?
