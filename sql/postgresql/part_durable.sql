-- Part "durable" (a CTE): where the server's synchronous_commit is off, local or
-- remote_write, the statement's own transaction commits with synchronous_commit = on, so an
-- acknowledged acquire, renewal or release survives a crash of the server (and of its standby).
durable AS (
  SELECT CASE WHEN current_setting('synchronous_commit') IN ('off', 'local', 'remote_write')
              THEN set_config('synchronous_commit', 'on', true) END AS sync
)
