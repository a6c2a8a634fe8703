-- Store the number of permits of a semaphore at its first use (kept when already stored; the
-- no-op update leaves the row as it is). Parameters: name, permits
INSERT INTO {{locks_semaphores}} (name, permits) VALUES (?, ?) ON DUPLICATE KEY UPDATE name = name
