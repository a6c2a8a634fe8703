-- The stored number of permits of a semaphore. Parameter: name
SELECT permits FROM {{locks_semaphores}} WHERE name = ?
