-- sqllock schema version 2: every acquisition carries an owner id unique to it (a random client id
-- and a sequence number). Renew and release check it, so a statement re-sent after a lost answer,
-- or sent by a client that shares another's holder label, can only ever match the acquisition it
-- was meant for. Re-entry is the client's bookkeeping: hold_count is 1 while held, 0 when free.
ALTER TABLE {{locks}} ADD COLUMN IF NOT EXISTS owner text;
