// Inventory helpers: decrement or reserve stock on the user's own table without overselling.
#pragma once

#include "sqllock/export.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sqllock/client.hpp"
#include "sqllock/transaction.hpp"
#include "sqllock/value.hpp"

namespace sqllock {

/// How a decrement is made safe against concurrent ones.
///
/// The strategies may be mixed freely on one table, with each other and with the user's own
/// version-checked writers: every statement that changes a quantity bumps the version column (when
/// the table has one, see stock_table::version_column) and is relative to the row
/// (`qty = qty - n ... AND qty >= n`), never an absolute value computed from an earlier read. So no
/// acknowledged decrement is lost and the quantity never goes below 0, whatever the mix. Quantities
/// reported back (new quantities, `available`) are read in the same transaction from the latest
/// committed row, locked by it, not from an older snapshot (MySQL's REPEATABLE READ).
enum class stock_strategy {
  /// One conditional statement per item:
  /// `UPDATE t SET qty = qty - n, version = version + 1 WHERE key = ? AND qty >= n`.
  /// Fewest round trips; the database's row lock orders concurrent decrements.
  atomic_update,
  /// Read qty and version, then a relative compare-and-swap on the version column:
  /// `UPDATE t SET qty = qty - n, version = version + 1 WHERE key = ? AND version = ? AND qty >= n`;
  /// a changed version (or too little left) re-runs the whole transaction, at most max_attempts
  /// times. Needs a version column.
  optimistic_cas,
  /// `SELECT ... FOR UPDATE` of all items (transaction::lock_rows, key order), then the same
  /// conditional update as atomic_update (version bumped too).
  /// SQLite: BEGIN IMMEDIATE (the whole database is write-locked for the transaction).
  for_update,
};

/// The user's stock table: one row per key with an integer quantity and, optionally, an integer
/// version column. All names are validated identifiers, quoted by sqllock.
struct SQLLOCK_EXPORT stock_table {
  std::string table;  ///< validated identifier, optionally schema.table
  std::string key_column = "sku";  ///< the key column
  std::string quantity_column = "qty";  ///< the integer quantity column
  /// Incremented by every strategy on every change of a row, so that version-checked writers
  /// (optimistic_cas, transaction::cas, your own) never overwrite a change they did not see.
  /// Empty: the table has no version column; atomic_update and for_update then change only the
  /// quantity, and optimistic_cas is refused (invalid_argument). A table without the named column
  /// is a database error, never silently skipped.
  std::string version_column = "version";
};

/// One line of a reservation.
struct SQLLOCK_EXPORT stock_item {
  value key;                  ///< an integer or text key (not NULL, not floating point)
  std::int64_t quantity = 1;  ///< at least 1
};

/// How reserve/decrement run.
struct SQLLOCK_EXPORT reserve_options {
  stock_strategy strategy = stock_strategy::atomic_update;  ///< how rows are changed (see stock_strategy)
  /// Bound on transaction runs (version conflicts, deadlocks, serialization failures, row locks
  /// not available in time); then the outcome is retries_exhausted.
  int max_attempts = 10;
  std::chrono::milliseconds backoff_min{1};  ///< back-off before the second run, doubled per run
  std::chrono::milliseconds backoff_max{50};  ///< longest back-off
  transaction_options transaction;  ///< options of each run's transaction
  /// Optional idempotency key (1..255 bytes): the first request with this key is applied and its
  /// outcome stored in idempotency_table in the same transaction; a repeated request (e.g. a retry
  /// after the answer was lost) gets the stored outcome back with `replayed` set and changes
  /// nothing. Reusing a key for a different request throws invalid_argument. Requests with the same
  /// merged items (same keys and total quantities) are the same request: a replay answers for the
  /// items as this call lists them (new_quantities, failed_item in this request's order).
  std::optional<std::string> idempotency_key;
  /// Created by create_idempotency_table (validated identifier).
  std::string idempotency_table = "sqllock_idempotency";
};

/// The typed outcome of a reservation.
struct SQLLOCK_EXPORT reserve_result {
  /// What happened to the reservation.
  enum class status {
    applied,            ///< every item was decremented
    insufficient,       ///< an item had less than requested; nothing was changed
    not_found,          ///< an item's key has no row; nothing was changed
    retries_exhausted,  ///< max_attempts transaction runs all hit conflicts; nothing was changed
  };
  status outcome = status::retries_exhausted;  ///< what happened
  /// applied: the quantity left of each item, in the order of the request.
  std::vector<std::int64_t> new_quantities;
  /// insufficient / not_found: index (in the request) of the first item that failed.
  std::size_t failed_item = 0;
  /// insufficient: the quantity that item had when the refusal was decided (the latest committed
  /// value, read in the refusing transaction).
  std::int64_t available = 0;
  /// The outcome was stored by an earlier request with the same idempotency key; nothing changed now.
  bool replayed = false;
  /// Transaction runs this call made (1 without conflicts).
  int attempts = 0;

  /// True when every item was decremented.
  bool applied() const noexcept { return outcome == status::applied; }
  /// The quantity left of the (first) item; throws invalid_argument unless applied.
  std::int64_t new_quantity() const;
};

/// Take `quantity` of one key from the stock table. See reserve.
SQLLOCK_EXPORT reserve_result decrement(client& c, const stock_table& table, const value& key, std::int64_t quantity = 1,
                         const reserve_options& options = {});

/// Take several items in one transaction, all or nothing. Items with the same key are merged, and so
/// are keys the database calls equal (one row: e.g. "Sku-1" and "sku-1 " under MariaDB's
/// utf8mb4_general_ci): checked against the row's quantity together, each reporting what it has left.
/// Rows are locked in one deterministic order (sorted keys; for_update: the database's key
/// order), so two reservations of the same items in opposite orders cannot deadlock, with one
/// exception: sorted keys are sorted bytewise, so under a case-insensitive collation two requests
/// that spell the same keys differently ("b","A" against "a","B") can lock rows in opposite orders;
/// the database then breaks the deadlock and the reservation is retried as a conflict.
/// Throws invalid_argument for bad names, keys or quantities, and database errors other than
/// the retryable ones (connection lost, missing table, ...).
SQLLOCK_EXPORT reserve_result reserve(client& c, const stock_table& table, const std::vector<stock_item>& items,
                       const reserve_options& options = {});

/// Create the idempotency-key table if it does not exist (idempotent; safe from many processes:
/// runs under the lease "sqllock:setup:<table>"). Columns: idem_key (primary key), request_hash,
/// outcome, failed_item, available, quantities, created_at. Rows are never deleted by sqllock;
/// prune old ones (by created_at) as your retry window allows.
SQLLOCK_EXPORT void create_idempotency_table(client& c, const std::string& table = "sqllock_idempotency");

}  // namespace sqllock
