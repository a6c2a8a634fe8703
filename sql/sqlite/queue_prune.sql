-- Delete the tickets of a name that expired more than 10 s ago (dead waiters): ?1 name.
DELETE FROM {{locks_queue}} WHERE name = ?1 AND expires_at <= sqllock_now_ms() - 10000
