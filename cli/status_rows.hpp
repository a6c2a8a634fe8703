// The rows `sqllock status` shows: the lock table's rows grouped under the names users gave.
// A reader-writer lease and a semaphore are stored as rows under derived names, decoded by the
// library's one parser (sqllock::decode_row_name); here each such row is shown under its lock's
// name with what it is: one writer (exclusive), one of N readers (shared), or permit K of a
// semaphore. A reader-writer lease's fence row (its fencing counter, never a hold) is not shown:
// the lease is listed once per holder, under its own name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sqllock/client.hpp"

namespace sqllock_cli {

struct status_row {
  /// internal: a row the library keeps beside a lock that is not a hold (the reader-writer fence).
  enum class kind { lock, read_write, semaphore, internal };
  sqllock::lock_info lock;  ///< lock.name: the user's name of the lock, reader-writer lease or semaphore
  kind what = kind::lock;
  bool shared = false;  ///< read_write: a reader (true) or the writer (false)
  int readers = 0;      ///< read_write: the live readers of this name (on every row of the name)
  int permit = -1;      ///< semaphore: the permit's slot (0-based)
  /// read_write, the writer: readers of another client are still inside, so this writer holds its
  /// row but waits for them to leave (writer preference keeps new readers out meanwhile).
  bool waiting = false;
};

/// Decode one lock-table row name (sqllock::decode_row_name): the user's name and what the row is,
/// or a plain lock (the name as is) when it is not a derived row name.
status_row status_row_of(const sqllock::lock_info& row);

/// Every row decoded but the internal ones, ordered by the user's name, then plain lock, writer,
/// readers (by fencing token), permits (by slot), each group's readers counted, a writer with
/// another client's readers inside marked waiting.
std::vector<status_row> status_rows(const std::vector<sqllock::lock_info>& locks);

/// The MODE column: "" for a plain lock, "exclusive", "exclusive (waiting for readers)",
/// "shared (N readers)", "permit K".
std::string mode_text(const status_row& row);

}  // namespace sqllock_cli
