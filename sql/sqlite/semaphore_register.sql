-- Store the number of permits of a semaphore at its first use (kept when already stored).
-- ?1 name, ?2 permits
INSERT INTO {{locks_semaphores}} (name, permits) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING
