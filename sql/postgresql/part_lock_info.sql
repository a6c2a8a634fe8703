-- Part "lock_info" (a select list): the columns every statement that answers lock rows
-- returns (lease_inspect, lease_list, lease_live_in_range, rw_writer_check[_nowait]), in the order the backend reads them.
name, holder_id, token, hold_count,
       floor(extract(epoch FROM (expires_at - clock_timestamp())) * 1000)::bigint AS ms_left,
       owner,
       floor(extract(epoch FROM acquired_at) * 1000)::bigint AS acquired_ms,
       floor(extract(epoch FROM expires_at) * 1000)::bigint AS expires_ms
