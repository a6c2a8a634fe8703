// Counting semaphores on the lease engine: permit k of semaphore S is a lease row of the lock table
// under a derived name that no lock name can be, and the local wait queue of S.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace sqllock::detail {

/// Most permits a semaphore may have (each is a lock row; a full scan tries each once).
inline constexpr int max_semaphore_permits = 10000;

/// The lock-table name of permit `slot` (0-based) of semaphore `semaphore` (a valid lock name):
/// "sqllock.semaphore.<bytes of S>.<S>.permit.<slot>", padded with '.' to 256 bytes. Lock names are
/// at most 255 bytes, so no lock name (and no user) can produce it; the length prefix makes it
/// unambiguous for any S. At most 256 + 30 bytes (the lock table takes 511 from schema version 3).
std::string permit_row_name(std::string_view semaphore, int slot);

/// The lock-table rows of every permit of semaphore `semaphore`: [first, second).
std::pair<std::string, std::string> permit_rows_range(std::string_view semaphore);

/// The key of the local wait queue of a semaphore's waiters (never sent to the database).
std::string permit_queue_key(std::string_view semaphore);

/// If `row_name` is a permit row name: the queue key of its semaphore (woken when a permit frees).
std::optional<std::string> permit_queue_of(std::string_view row_name);

/// If `row_name` is a permit row name: its semaphore's name and the permit's slot.
std::optional<std::pair<std::string_view, int>> permit_of(std::string_view row_name);

}  // namespace sqllock::detail
