// The client users hold: lease locks with watchdog and waiting, transactions, administration.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "sqllock/error.hpp"
#include "sqllock/transaction.hpp"

namespace sqllock {

namespace detail {
class backend;
struct client_state;
struct lease_state;
}  // namespace detail

/// Severity of a message sent to client_options::log.
enum class log_level { debug, info, warning, error };

/// Receives everything the library has to say; the library never writes to stdout or stderr.
using log_callback = std::function<void(log_level, std::string_view message)>;

/// Whom a lease belongs to, for reentrancy.
enum class holder_scope {
  per_thread,  ///< holder id = client id + thread: threads sharing a client exclude each other
  per_client,  ///< holder id = client id exactly: every thread of the client re-enters
};

/// How a client connects and behaves.
struct client_options {
  /// Base holder id. Empty: "host:pid:random", unique per client.
  std::string holder_id;
  holder_scope scope = holder_scope::per_thread;
  /// Lock table name (validated identifier, optionally schema-qualified).
  std::string table = "sqllock_locks";
  /// Refuse to connect when the lock tables are missing or old (throws schema_missing).
  bool require_schema = true;
  /// Wake waiters through the database where it can (PostgreSQL LISTEN/NOTIFY, MySQL GET_LOCK,
  /// SQLite file locks). Off: polling with back-off only (e.g. PgBouncer in transaction mode).
  bool notifications = true;
  /// Use server-side prepared statements (PostgreSQL); off for PgBouncer in transaction mode.
  bool prepared_statements = true;
  /// Back-off between database polls of a waiting acquire, never past the holder's lease end.
  /// Where the database wakes waiters (notifications on and the watch accepted), polling is only
  /// the safety net and each wait is drawn uniformly from [poll_max/2, poll_max]; otherwise the
  /// n-th wait is drawn from [b/2, b] with b = min(poll_max, poll_min * 2^n).
  std::chrono::milliseconds poll_min{10};
  std::chrono::milliseconds poll_max{250};
  log_callback log;
};

/// A lock as the database shows it.
struct lock_info {
  std::string name;
  std::string holder;
  std::int64_t fencing_token = 0;
  std::int64_t hold_count = 0;
  std::chrono::milliseconds time_left{0};  ///< negative when expired
};

/// How a lease is held.
struct lease_options {
  /// Lease duration; must be positive (at least 1 ms). The watchdog renews at about a third of it.
  std::chrono::milliseconds ttl{30000};
  /// Renew automatically while held (the watchdog). Off: the lease simply expires after ttl.
  bool auto_renew = true;
  /// Called once when the lease is found lost: from the watchdog thread, or from renew().
  std::function<void(const std::string& name, std::int64_t fencing_token)> on_lost;
};

/// A held lease. Releases exactly once: explicitly, or in its destructor (which never throws and
/// reports a failed release to the client's log callback).
class lease_guard {
 public:
  lease_guard() noexcept;
  lease_guard(lease_guard&&) noexcept;
  lease_guard& operator=(lease_guard&&) noexcept;
  lease_guard(const lease_guard&) = delete;
  lease_guard& operator=(const lease_guard&) = delete;
  ~lease_guard();

  const std::string& name() const;
  const std::string& holder_id() const;
  /// Strictly greater than every earlier acquisition's token of this name; kept when reentrant.
  std::int64_t fencing_token() const;
  /// The hold count right after this acquisition (1 for a first acquisition).
  std::int64_t hold_count() const;
  /// True once the watchdog or an operation found the lease taken over, deleted or expired.
  bool lost() const noexcept;
  /// True while this guard owns a (possibly lost) acquisition that it has not released.
  bool owns() const noexcept;
  explicit operator bool() const noexcept { return owns(); }

  /// Renew now (the watchdog does this on its own). Throws lease_lost when the owner check fails,
  /// or when the database cannot be reached (after one retry on a fresh connection) and the lease
  /// has run out by the client's conservative clock; connection_lost while it may still be held.
  void renew();
  /// Release now. Throws lease_lost if the owner check fails (the lease was taken over); the guard
  /// is finished either way.
  void release();

 private:
  friend class client;
  explicit lease_guard(std::shared_ptr<detail::lease_state> s) noexcept;
  std::shared_ptr<detail::lease_state> state_;
};

/// A connection to one lock database. Move-only; uses a small, fixed number of connections:
/// one for all lease operations (the watchdog and every waiter share it), one more for
/// notifications where the backend has them (PostgreSQL LISTEN, MySQL GET_LOCK waits), plus one
/// per open transaction (idle ones are kept for reuse, at most 2).
class client {
 public:
  client(client&&) noexcept;
  client& operator=(client&&) noexcept;
  client(const client&) = delete;
  client& operator=(const client&) = delete;
  ~client();

  /// "sqlite", "postgresql" or "mysql".
  std::string_view backend_name() const noexcept;
  /// The holder id this thread acquires as.
  std::string holder_id() const;

  /// One attempt; std::nullopt when someone else holds a live lease.
  std::optional<lease_guard> try_acquire(std::string_view name, const lease_options& options = {});
  /// Wait up to `timeout`; std::nullopt when not acquired in time.
  std::optional<lease_guard> try_acquire_for(std::string_view name, std::chrono::milliseconds timeout,
                                             const lease_options& options = {});
  /// Wait up to `timeout`; throws acquire_timeout (naming the holder) when not acquired in time,
  /// cancelled when `stop` is requested.
  lease_guard acquire_for(std::string_view name, std::chrono::milliseconds timeout,
                          const lease_options& options = {}, std::stop_token stop = {});
  /// Wait until acquired; throws cancelled when `stop` is requested.
  lease_guard acquire(std::string_view name, const lease_options& options = {},
                      std::stop_token stop = {});

  /// The lock row of `name` if it is held (live or expired-but-not-released).
  std::optional<lock_info> inspect(std::string_view name);
  /// Every lock with a live lease, by name.
  std::vector<lock_info> list_locks();
  /// Administrative release of a stuck lock, whoever holds it. Returns false if it was not held.
  /// The fencing sequence of the name is kept.
  bool force_release(std::string_view name);

  /// Begin a transaction on a connection of its own.
  transaction begin(const transaction_options& options = {});

  /// Create or upgrade the lock tables (idempotent, safe from many processes at once).
  /// Returns the schema version now present.
  int migrate();
  /// The schema version present (0 = no lock tables).
  int schema_version();
  /// The schema version this library needs.
  static int required_schema_version() noexcept;

  /// Statements sent to the database on the lease connection since connect (for benchmarks).
  std::uint64_t statement_count() const noexcept;

 private:
  friend client connect(std::string_view, const client_options&);
  friend struct detail::client_state;
  client(std::unique_ptr<detail::backend> b, const client_options& options);
  std::optional<lease_guard> acquire_impl(std::string_view name, const lease_options& options,
                                          std::optional<std::chrono::milliseconds> timeout,
                                          std::stop_token stop, bool throw_on_timeout);
  std::shared_ptr<detail::client_state> state_;
};

/// Connect to the lock database named by `url`:
///   postgresql://user:pass@host:port/db?... (or postgres://), mysql://user:pass@host:port/db,
///   sqlite:PATH, sqlite:///abs/path.db, sqlite::memory:
/// Throws invalid_argument (bad URL or unknown scheme, or a backend not built in), connection_lost
/// (unreachable), schema_missing (when options.require_schema and the tables are missing or old).
client connect(std::string_view url, const client_options& options = {});

}  // namespace sqllock
