-- The stored number of permits of a semaphore. ?1 name
SELECT permits FROM {{locks_semaphores}} WHERE name = ?1
