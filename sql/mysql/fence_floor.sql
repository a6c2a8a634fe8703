-- A fence created by this transaction (fence_advance said 1): one above every token the name's
-- rows had before it (each row's own sequence, from before fences existed). Parameters: lo, hi
-- (the range of every row of the name), the fence row name.
SELECT COALESCE(MAX(token), 0) + 1 FROM {{locks}} WHERE name >= ? AND name < ? AND name <> ?
