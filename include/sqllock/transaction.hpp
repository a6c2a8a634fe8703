// RAII transactions with optimistic CAS and pessimistic row locks on the user's own tables.
#pragma once

#include "sqllock/export.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "sqllock/error.hpp"
#include "sqllock/value.hpp"

namespace sqllock {

class lease_guard;

namespace detail {
class session;
}

/// How a transaction starts.
struct SQLLOCK_EXPORT transaction_options {
  /// Upper bound on waiting for any lock inside the transaction. PostgreSQL: `SET LOCAL
  /// lock_timeout`; MySQL: `innodb_lock_wait_timeout` for the session (whole seconds, rounded up);
  /// SQLite: the busy timeout of `BEGIN IMMEDIATE`. Unset: the server's default (SQLite: 5 s).
  std::optional<std::chrono::milliseconds> lock_timeout;
};

/// An optimistic compare-and-swap of some columns of one row, guarded by a version column.
///   UPDATE table SET set..., version = version + 1 WHERE key... AND version = expected
struct SQLLOCK_EXPORT cas_request {
  std::string table;                                  ///< validated identifier, optionally schema.table
  std::vector<std::pair<std::string, value>> key;     ///< column = value pairs selecting one row
  std::string version_column = "version";             ///< integer column compared and incremented
  std::int64_t expected_version = 0;  ///< the version the row must have for the update to apply
  std::vector<std::pair<std::string, value>> set;     ///< columns to assign (may be empty)
};

/// The typed outcome of a CAS.
struct SQLLOCK_EXPORT cas_result {
  /// applied; conflict: another version was found; missing: no such row.
  enum class status { applied, conflict, missing };
  status outcome = status::missing;  ///< what happened
  /// applied: the new version; conflict: the version found; missing: 0.
  std::int64_t version = 0;

  /// True when the write was applied.
  bool applied() const noexcept { return outcome == status::applied; }
  /// The new version, or throws version_conflict (conflict) / database_error (missing row).
  std::int64_t value() const;
};

/// Row-lock waiting behaviour.
enum class lock_wait {
  wait,         ///< wait (bounded by row_lock_request::timeout or the transaction's lock_timeout)
  nowait,       ///< fail at once if any row is locked
  skip_locked,  ///< lock what is free, skip the rest
};

/// Lock strength. PostgreSQL distinguishes FOR NO KEY UPDATE (does not block foreign-key checks).
enum class lock_strength { update, no_key_update };

/// Lock rows of a user table selected by one key column.
///   SELECT columns FROM table WHERE key_column IN (keys...) ORDER BY key_column FOR UPDATE [...]
/// On MySQL the key column must have a usable unique or primary index (otherwise InnoDB would
/// lock every scanned row), which the statement then forces, keys on a text column must be text,
/// text keys on a number column must be numbers written out (text that is none would be read as 0
/// or as its leading digits, and lock another row), and the table must be InnoDB (other engines
/// keep no row lock past the statement); otherwise the request is refused with invalid_argument
/// before any lock is taken. On PostgreSQL a key that is no value of the column's type (a text key
/// that is no number for a bigint column, one out of range) is invalid_argument too, and the
/// transaction stays as it was (so it does for `cas` and `fenced_update`). SQLite compares such a
/// key as it is: a row with no such key. On every backend a key given as text with space around it
/// (" 1") for a column that holds numbers is invalid_argument: a key is an exact value, never trimmed.
/// On SQLite the whole database is write-locked by `BEGIN IMMEDIATE` when the transaction starts;
/// the call then only reads the rows, and `nowait`/`timeout` apply to that begin.
///
/// A `not_available` answer on MySQL/MariaDB may leave some of the requested rows locked: those the
/// statement locked before it met the unavailable one (in key order) stay locked by this
/// transaction until it commits or rolls back, since InnoDB keeps the row locks of a statement it
/// rolled back (it keeps them after `ROLLBACK TO SAVEPOINT` too). Others wanting those rows wait
/// for this transaction; end it soon after a refusal if that matters. PostgreSQL runs the
/// statement in a savepoint and rolls back to it, which releases them: nothing requested stays
/// locked. On MySQL/MariaDB a requested key with no row locks the gap where it would be (InnoDB's
/// REPEATABLE READ): others' inserts into that gap wait until this transaction ends.
struct SQLLOCK_EXPORT row_lock_request {
  std::string table;  ///< validated identifier, optionally schema.table
  std::string key_column;  ///< the column the keys select
  std::vector<value> keys;  ///< the rows to lock, by key
  std::vector<std::string> columns;  ///< columns to return; empty: the key column only
  lock_wait mode = lock_wait::wait;  ///< wait, nowait or skip_locked
  lock_strength strength = lock_strength::update;  ///< exclusive or shared row lock
  /// Bound on waiting for this statement as a whole, over all its rows (mode == wait). PostgreSQL:
  /// lock_timeout and statement_timeout for this statement; MariaDB: `WAIT n` and
  /// max_statement_time (whole seconds, rounded up); MySQL 8: innodb_lock_wait_timeout, which
  /// bounds each row's wait on its own.
  std::optional<std::chrono::milliseconds> timeout;
};

/// The typed outcome of a row-lock request.
struct SQLLOCK_EXPORT row_lock_result {
  /// acquired; not_available: a row was locked by another transaction (nowait, timeout).
  enum class status { acquired, not_available };
  status outcome = status::not_available;  ///< what happened
  /// The locked rows in key order (for skip_locked, the ones that were free; missing keys are absent).
  result_rows rows;

  /// True when the rows are locked.
  bool acquired() const noexcept { return outcome == status::acquired; }
};

/// A fenced write (Kleppmann's pattern) to one row of a user table that carries a fence column:
///   UPDATE table SET set..., fence_column = token WHERE key... AND coalesce(fence_column, 0) <= token
/// A write stamped with an older token than the row's is refused, whoever makes it: for data that
/// other processes (or other lock names) also write.
struct SQLLOCK_EXPORT fenced_update_request {
  std::string table;                               ///< validated identifier, optionally schema.table
  std::vector<std::pair<std::string, value>> key;  ///< column = value pairs selecting one row
  std::string fence_column = "fence";              ///< integer column holding the last writer's token
  std::int64_t token = 0;                          ///< the writer's fencing token
  std::vector<std::pair<std::string, value>> set;  ///< columns to assign
};

/// The typed outcome of a fenced update.
struct SQLLOCK_EXPORT fenced_update_result {
  /// applied; rejected: a newer token has written the row; missing: no such row.
  enum class status { applied, rejected, missing };
  status outcome = status::missing;  ///< what happened
  /// rejected: the newer token already on the row; otherwise the token written (applied) or 0.
  std::int64_t fence = 0;

  /// True when the write was applied.
  bool applied() const noexcept { return outcome == status::applied; }
  /// Throws fence_rejected (a newer token has written) or database_error (no such row).
  void value() const;
};

/// A database transaction on a connection of its own (or on an adopted application connection).
/// Roll back on destruction unless committed; errors in that rollback go to the client's log.
class SQLLOCK_EXPORT transaction {
 public:
  // Made by the library only (client::begin, adopt): not exported from a shared build.
  /// Made by the library only (client::begin, adopt).
  SQLLOCK_NO_EXPORT explicit transaction(std::unique_ptr<detail::session> s);
  /// Takes over the other's open transaction.
  transaction(transaction&&) noexcept;
  /// Rolls this one back if it is open (as its destructor does), then takes over the other's.
  transaction& operator=(transaction&&) noexcept;
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  ~transaction();

  /// Commit. Throws on failure (e.g. serialization_failure); the transaction is then finished.
  /// connection_lost from commit() means the outcome is unknown: the answer may have been lost
  /// after the database committed (make the write idempotent, or check, before running it again).
  void commit();
  /// Roll back now. Idempotent after commit/rollback.
  void rollback();
  /// True until commit() or rollback() (or a failure that ended it).
  bool active() const noexcept;

  /// Run a statement with `?` placeholders bound to params; returns the affected row count.
  /// The connection is pooled (not adopted): after the transaction it serves the client's next
  /// transactions. Session state the statement leaves beyond the transaction (a session SET, a
  /// temporary table, a user variable, a session-level pg_advisory_lock or GET_LOCK) rides along
  /// into them, and such a lock stays held until that connection closes: keep statements
  /// transaction-scoped (SET LOCAL, pg_advisory_xact_lock), or use adopt() on a connection of your own.
  std::int64_t execute(std::string_view sql, const std::vector<value>& params = {});
  /// Run a query with `?` placeholders bound to params; returns all rows as text.
  result_rows query(std::string_view sql, const std::vector<value>& params = {});

  /// Optimistic compare-and-swap; see cas_request.
  cas_result cas(const cas_request& request);
  /// Pessimistic row lock; see row_lock_request. A lock that is not available is a result, and
  /// the transaction stays usable (on MySQL/MariaDB with some of the requested rows possibly still
  /// locked by it: see row_lock_request).
  row_lock_result lock_rows(const row_lock_request& request);

  /// Guard this transaction with a lease: check, on the database's clock, that `lease` (of a client
  /// on this same database) is still held (its owner id, token, not expired), and lock its row in
  /// share mode until this transaction ends, so that no takeover can commit meanwhile: a write made
  /// in a guarded transaction commits only while the lease is held, whatever pauses its writer
  /// takes. PostgreSQL `FOR KEY SHARE` (renewals go on; a takeover waits); MySQL/MariaDB
  /// `LOCK IN SHARE MODE` (renewals of this lease wait too: keep guarded transactions well inside
  /// the TTL); SQLite: the transaction's write lock already excludes every other writer.
  /// The guard must get its row lock before the lease's loss point by this process's clock
  /// (lease_guard::usable() after the statement): one that waited for another transaction's lock
  /// on the row until past it is refused. A release of the lease while this transaction is open
  /// is held back (in the client's release outbox) and sent when the transaction ends.
  /// Throws lease_lost when the lease is gone; the transaction then writes nothing: commit()
  /// throws lease_lost too and rolls back. Works on adopted connections (the application's own
  /// transaction; nothing is committed or rolled back there). There the handle ends before the
  /// application's transaction does: PostgreSQL then finds the lease row still locked and leaves a
  /// release to the outbox until the transaction ends; on MySQL/MariaDB and SQLite a release waits
  /// for it (up to its bound, then the outbox): release after the application's commit.
  void require_lease(const lease_guard& lease);

  /// A fenced write; see fenced_update_request. A refused write is a result.
  fenced_update_result fenced_update(const fenced_update_request& request);

 private:
  std::unique_ptr<detail::session> session_;
  bool guard_failed_ = false;
  std::shared_ptr<void> guard_;  ///< marks the guarded lease while this transaction lives
};

/// Bounds and back-off of with_retry.
struct SQLLOCK_EXPORT retry_policy {
  int max_attempts = 10;  ///< transaction runs at most (at least 1)
  std::chrono::milliseconds backoff_min{2};  ///< back-off before the second run, doubled per run
  std::chrono::milliseconds backoff_max{100};  ///< longest back-off
  transaction_options transaction;  ///< options of each run's transaction
};

/// What with_retry did, for metrics.
struct SQLLOCK_EXPORT retry_stats {
  int attempts = 0;  ///< transaction runs made
};

/// with_retry()'s jittered back-off before the next attempt (called from the template below, so
/// part of the ABI, not an internal detail).
SQLLOCK_EXPORT void retry_backoff_sleep(const retry_policy& policy, int attempt);
/// with_retry()'s final error: throws retries_exhausted naming the last error.
[[noreturn]] SQLLOCK_EXPORT void throw_retries_exhausted(const char* what, int attempts);

/// Run `fn(transaction&)` in a fresh transaction and commit; on a retryable error (version
/// conflict, deadlock, serialization failure) roll back, wait a jittered back-off and run the
/// whole function again, at most policy.max_attempts times; then throw retries_exhausted.
/// Any other error ends it at once, connection_lost too: never run again, since its COMMIT may have
/// been applied (see transaction::commit).
/// `begin` is anything with `transaction begin(const transaction_options&)` (a sqllock::client).
template <class Begin, class Fn>
auto with_retry(Begin& begin, Fn&& fn, const retry_policy& policy = {}, retry_stats* stats = nullptr)
    -> std::invoke_result_t<Fn&, transaction&> {
  for (int attempt = 1;; ++attempt) {
    if (stats) stats->attempts = attempt;
    try {
      transaction tx = begin.begin(policy.transaction);
      if constexpr (std::is_void_v<std::invoke_result_t<Fn&, transaction&>>) {
        fn(tx);
        tx.commit();
        return;
      } else {
        auto result = fn(tx);
        tx.commit();
        return result;
      }
    } catch (const retryable_error& e) {
      if (attempt >= policy.max_attempts) throw_retries_exhausted(e.what(), attempt);
      retry_backoff_sleep(policy, attempt);
    }
  }
}

}  // namespace sqllock
