-- Part "lock_info" (a select list): the columns every statement that answers lock rows
-- returns (lease_inspect, lease_live_in_range, lease_list), in the order the backend reads them.
name, holder_id, token, hold_count, expires_at - sqllock_now_ms(), owner, acquired_at, expires_at
