-- Part "lock_info" (a select list): the columns every statement that answers lock rows
-- returns (lease_inspect, lease_list, lease_live_in_range, rw_writer_check[_nowait]), in the order the backend reads them.
name, holder_id, token, hold_count,
       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at), owner,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01', acquired_at),
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires_at)
