-- Delete a fair waiter's ticket: $1 owner id (fair_release.sql deletes a holder's own).
DELETE FROM {{locks_queue}} WHERE owner = $1
