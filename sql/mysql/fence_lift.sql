-- Lift a fence this transaction created (and holds locked) to fence_floor's value; never lowers
-- it. Parameters: the value, the fence row name.
UPDATE {{locks}} SET token = GREATEST(token, ?) WHERE name = ?
