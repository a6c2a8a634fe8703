-- Part "epoch" (a CTE): first_token, the least token a grant may get on this timeline
-- (timeline - 1 in the bits from 40 up, at least 1), so that a token never repeats one an old
-- primary gave out before a promotion.
epoch AS (
  SELECT greatest(1, ({{part:timeline}}) << 40) AS first_token
)
