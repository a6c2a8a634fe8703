-- Delete a fair waiter's or holder's ticket: owner id.
DELETE FROM {{locks_queue}} WHERE owner = ?
