-- Version 2: every acquisition carries an owner id unique to it (a random client id and a
-- sequence number); renew and release check it, so a re-sent statement or a client sharing a
-- holder label can only ever match the acquisition it was meant for. Re-entry is kept by the
-- client: hold_count is 1 while held, 0 when free.
ALTER TABLE {{locks}} ADD COLUMN owner TEXT;
