-- Delete the tickets of a name that expired more than 10 s ago (dead waiters, and released
-- holders' tickets: fair_release.sql expires them at 1970-01-01): name.
DELETE FROM {{locks_queue}} WHERE name = ? AND expires_at <= UTC_TIMESTAMP(6) - INTERVAL 10 SECOND
