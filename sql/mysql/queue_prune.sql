-- Delete the tickets of a name that expired more than 10 s ago (dead waiters): name.
DELETE FROM {{locks_queue}} WHERE name = ? AND expires_at <= UTC_TIMESTAMP(6) - INTERVAL 10 SECOND
