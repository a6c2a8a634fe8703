-- Delete a fair waiter's or holder's ticket: ?1 owner id.
DELETE FROM {{locks_queue}} WHERE owner = ?1
