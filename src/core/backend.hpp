// The backend seam: the handful of operations the three primitives need from a database.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sqllock/client.hpp"
#include "sqllock/parse.hpp"
#include "sqllock/transaction.hpp"
#include "sqllock/value.hpp"

namespace sqllock::detail {

/// Result of the one-statement acquire.
struct acquire_outcome {
  bool acquired = false;
  std::int64_t token = 0;       ///< acquired: the fencing token
  std::int64_t hold_count = 0;  ///< acquired: the hold count after this acquire
  /// Not acquired: who holds it and for how long still (database clock), for messages and waits.
  std::string holder;
  std::chrono::milliseconds time_left{0};
};

/// One lease to renew in a batch.
struct renew_item {
  std::string name;
  std::string holder;
  std::int64_t token = 0;
  std::chrono::milliseconds ttl{0};
};

/// Result of an owner-checked release.
struct release_outcome {
  bool released = false;          ///< false: owner check failed (not the holder / token changed)
  std::int64_t remaining_holds = 0;  ///< hold count left (0: the lock is free)
};

/// One transaction on one connection. Statements use `?` placeholders (the PostgreSQL backend
/// rewrites them to $n outside quotes). Every method maps driver errors through the backend's one
/// error-mapping function.
class session {
 public:
  virtual ~session() = default;
  virtual void commit() = 0;
  /// Must not throw; reports problems to the log it was given.
  virtual void rollback() noexcept = 0;
  virtual std::int64_t execute(std::string_view sql, const std::vector<value>& params) = 0;
  virtual result_rows query(std::string_view sql, const std::vector<value>& params) = 0;
  virtual cas_result cas(const cas_request& request) = 0;
  virtual row_lock_result lock_rows(const row_lock_request& request) = 0;
};

/// Where a backend reports "this name may have been released" events (notification, file lock).
class wake_sink {
 public:
  virtual ~wake_sink() = default;
  virtual void wake(const std::string& name) noexcept = 0;
};

/// Backend construction parameters shared by every backend.
struct backend_config {
  database_url url;
  client_options options;  ///< table name, notifications, prepared statements, log
};

/// A lock database. Lease methods may be called from several threads at once (user threads and
/// the watchdog); a backend serializes them on its single lease connection. begin() returns a
/// session on a separate connection.
class backend {
 public:
  virtual ~backend() = default;

  virtual std::string_view kind() const noexcept = 0;

  // Schema.
  virtual int schema_version() = 0;
  virtual int migrate() = 0;

  // Lease lock: each one statement (or one short transaction where the dialect forces it).
  virtual acquire_outcome acquire(const std::string& name, const std::string& holder,
                                  std::chrono::milliseconds ttl) = 0;
  /// Renew a batch in as few statements as the dialect allows; returns the indices of the items
  /// whose owner check passed (the others are lost).
  virtual std::vector<std::size_t> renew(std::span<const renew_item> items) = 0;
  /// Owner-checked release of one hold. With expected_holds, it applies only while the row still
  /// counts exactly that many holds: the core re-sends a release whose answer was lost with that
  /// count, so it applies at most once (not at all if the lost one was applied after all).
  virtual release_outcome release(const std::string& name, const std::string& holder, std::int64_t token,
                                  std::optional<std::int64_t> expected_holds = std::nullopt) = 0;
  /// Free a lock whoever holds it (fencing sequence kept). False if it was not held.
  virtual bool force_release(const std::string& name) = 0;
  /// The row of one name, if it has a holder (live or expired).
  virtual std::optional<lock_info> inspect(const std::string& name) = 0;
  /// Every lock with a live lease, ordered by name.
  virtual std::vector<lock_info> list_locks() = 0;

  // Transactions.
  virtual std::unique_ptr<session> begin(const transaction_options& options) = 0;

  // Wake-ups. The client calls watch() when a local waiter starts waiting on a name and
  // unwatch() when the last one stops; the backend calls sink->wake(name) when it learns the name
  // may have been released by another client. Default: no events (polling only).
  virtual void set_wake_sink(wake_sink* sink) { (void)sink; }
  virtual void watch(const std::string& name) { (void)name; }
  virtual void unwatch(const std::string& name) { (void)name; }

  /// Statements sent on the lease connection (acquire, renew, release, ...), for benchmarks.
  std::uint64_t statements() const noexcept { return statements_.load(std::memory_order_relaxed); }

 protected:
  void count_statement() noexcept { statements_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> statements_{0};
};

/// The schema version this library needs (migrations/<dialect>/0001_... up to this).
inline constexpr int required_schema_version = 1;

/// Send a message to the client's log callback, if any (never throws).
void log_message(const client_options& options, log_level level, std::string_view message) noexcept;

/// Substitute `{{locks}}` and `{{locks_schema}}` in an embedded statement with the quoted
/// identifiers derived from the validated table name.
std::string render_sql(std::string_view sql_template, std::string_view table, dialect d);

/// An embedded statement text: sql/<dialect>/<name>.sql. Throws std::logic_error if missing.
std::string_view embedded_sql(std::string_view dialect_name, std::string_view name);
/// The embedded migrations of a dialect, ordered by version: (version, file name, text).
struct embedded_migration {
  int version;
  std::string_view file;
  std::string_view text;
};
std::vector<embedded_migration> embedded_migrations(std::string_view dialect_name);

// Factories, one per built backend (defined in src/<backend>/).
std::unique_ptr<backend> make_sqlite_backend(const backend_config& config);
std::unique_ptr<backend> make_postgresql_backend(const backend_config& config);
std::unique_ptr<backend> make_mysql_backend(const backend_config& config);

}  // namespace sqllock::detail
