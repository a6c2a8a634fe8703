// Internals of the MySQL/MariaDB backend: connections, statement running, error mapping, sessions.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/backend.hpp"
#include "core/idle_pool.hpp"
#include "sqllock/parse.hpp"
#include "sqllock/value.hpp"

namespace sql {
class Connection;
class PreparedStatement;
class SQLException;
}  // namespace sql

namespace sqllock::detail::mysql {

inline constexpr std::string_view backend_name = "mysql";

/// The one error-mapping function of this backend: turns a driver exception into the typed
/// sqllock error (1205/3572 lock_not_available, 1213 deadlock_detected, 2006/2013/... connection_lost,
/// 1317/1969/3024 query_canceled, 1146 on a lock-table statement schema_missing, else
/// database_error). The message names the statement and the vendor code, never bound values: the
/// server's text is kept with every quoted part replaced by '?'.
[[noreturn]] void map_error(const sql::SQLException& e, std::string_view statement, bool lock_table_statement = false);

/// True for the vendor codes that mean the connection is gone.
bool is_connection_error(int code) noexcept;

/// The server text of an error with every quoted value replaced (values never leak); quoted
/// identifiers (database, table, column, user names) stay readable.
std::string redact_server_message(std::string_view message);

/// Facts about the server learned once per connection.
struct server_traits {
  bool mariadb = true;
  int major = 0;  ///< from VERSION(), e.g. 10 and 11 for "10.11.6-MariaDB"
  int minor = 0;
  bool rollback_on_timeout = false;
  std::string database;  ///< current database ("" if none)
  /// Durability settings: innodb_flush_log_at_trx_commit (1: flushed at each commit), sync_binlog
  /// and log_bin (with the binary log on, a commit is durable only with sync_binlog = 1: crash
  /// recovery rolls back transactions missing from the binlog), wsrep_on (a Galera node).
  int flush_log_at_trx_commit = 1;
  long sync_binlog = 1;
  bool log_bin = false;
  bool wsrep_on = false;
  /// Galera only: the primary component's size when the connection was opened (0: not Primary).
  long galera_cluster_size = 0;
  /// Galera only: the provider option that lets a partitioned minority go on writing
  /// ("pc.ignore_sb" or "pc.ignore_quorum" set to true), "" when neither is.
  std::string galera_split_brain_option;
  /// read_only = ON (a replica, by convention): accounts with READ ONLY ADMIN may still write there,
  /// but a lock taken there is not seen by the primary's clients.
  bool read_only = false;
};

/// Throws database_error naming the setting when `t` says commits may be lost in a crash (so an
/// acquisition, and its fencing token, could be handed out again), unless `allow` (the user accepted
/// the risk: client_options::allow_unsafe_durability). A Galera node in a primary component of 2 or
/// more acknowledges a commit only after its write set reached every node, so a crash of any one
/// node loses nothing acknowledged: there innodb_flush_log_at_trx_commit = 2 (written to the OS at
/// each commit, flushed about once a second) and a lazy sync_binlog are accepted; 0 is not (a
/// crash of every mariadbd process at once, e.g. a bad upgrade, would lose the last second).
void require_durable(const server_traits& t, bool allow);

/// Galera: "pc.ignore_sb" or "pc.ignore_quorum" when wsrep_provider_options sets it to true, else "".
std::string split_brain_option(std::string_view provider_options);

/// Where and how to connect (from the URL); never printed except through url.redacted().
struct connect_params {
  database_url url;
  int connect_timeout_s = 10;
  /// The URL's ssl-mode (MySQL's --ssl-mode values); preferred when not given.
  enum class tls { disabled, preferred, required, verify_ca, verify_identity } ssl_mode = tls::preferred;
  /// File paths handed to the driver (ssl-ca, ssl-capath, ssl-cert, ssl-key) and ssl-cipher; empty: not set.
  std::string ssl_ca, ssl_capath, ssl_cert, ssl_key, ssl_cipher;
};

/// Open a connection. found_rows: CLIENT_FOUND_ROWS (affected rows = matched rows).
/// read_timeout_s 0: none. connect_timeout_s 0: the URL's. With `socket_fd`, also finds the
/// connection's socket (-1 when it cannot be told apart from another one opened at the same
/// moment), and bounds the whole connect, handshake included, by connect_timeout_s, or by `until`
/// when that is set and earlier (the driver counts whole seconds; `until` is kept to the
/// millisecond by shutting the new socket down). Throws connection_lost (unreachable) or
/// invalid_argument (bad option).
std::unique_ptr<sql::Connection> open_connection(const connect_params& params, bool found_rows, int read_timeout_s,
                                                 int* socket_fd = nullptr, int connect_timeout_s = 0,
                                                 std::chrono::steady_clock::time_point until = {});

/// Shuts a connection's socket down at a deadline, so that a statement blocked on it (a partition,
/// a hung server) returns at once with a lost connection: Connector/C++ 1.1 has no timeout finer
/// than whole seconds and no way to interrupt a statement. One thread per timer, started lazily.
class deadline_timer {
 public:
  deadline_timer() = default;
  ~deadline_timer();
  deadline_timer(const deadline_timer&) = delete;
  deadline_timer& operator=(const deadline_timer&) = delete;

  /// While it lives, `fd` is shut down (SHUT_RDWR) when `deadline` passes.
  class armed {
   public:
    armed(deadline_timer& t, std::uint64_t id) : timer_(&t), id_(id) {}
    armed(armed&& o) noexcept : timer_(o.timer_), id_(o.id_) { o.timer_ = nullptr; }
    armed& operator=(armed&&) = delete;
    ~armed();
    /// True once the deadline passed and the socket was shut down.
    bool fired() const;

   private:
    deadline_timer* timer_;
    std::uint64_t id_;
  };
  armed arm(int fd, std::chrono::steady_clock::time_point deadline);

 private:
  void loop();
  struct entry {
    int fd;
    std::chrono::steady_clock::time_point deadline;
    bool fired = false;
  };
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::uint64_t, entry> entries_;
  std::uint64_t next_id_ = 1;
  /// When the thread wakes next by itself (max: it waits for a notification). Under mutex_.
  std::chrono::steady_clock::time_point sleeping_until_ = std::chrono::steady_clock::time_point::min();
  bool stopping_ = false;
  std::thread thread_;
};

/// Parse the URL parameters this backend accepts into connect_params. Throws invalid_argument.
connect_params make_connect_params(const database_url& url);

/// One driver connection (owned or borrowed) with cached prepared statements.
class connection {
 public:
  /// Owned: closed on destruction.
  explicit connection(std::unique_ptr<sql::Connection> owned);
  /// Borrowed (adopted): never closed here.
  explicit connection(sql::Connection* borrowed);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  sql::Connection& raw() noexcept { return *conn_; }
  bool owned() const noexcept { return static_cast<bool>(owned_); }
  /// True once a statement failed because the connection is gone.
  bool broken() const noexcept { return broken_; }
  void mark_broken() noexcept { broken_ = true; }
  /// The connection's socket (-1: unknown).
  int socket_fd() const noexcept { return socket_fd_; }
  void set_socket_fd(int fd) noexcept { socket_fd_ = fd; }
  /// Whether the server has not ended this idle connection (killed, restarted, timed out): its
  /// socket has no end-of-file or unsolicited error waiting. Without the socket: a ping if idle for
  /// over a second. Never blocks longer than a ping.
  bool alive();

  /// Run a statement with `?` placeholders; returns the affected (or, with CLIENT_FOUND_ROWS,
  /// matched) row count. Errors go through map_error with the statement name.
  std::int64_t execute(std::string_view sql, const std::vector<value>& params, std::string_view statement,
                       bool lock_table = false);
  /// Run a query; every column as text, NULL as nullopt.
  result_rows query(std::string_view sql, const std::vector<value>& params, std::string_view statement,
                    bool lock_table = false);
  /// Run a statement without parameters through the text protocol (COMMIT, ROLLBACK): unlike
  /// sql::Connection::commit(), whose failure Connector/C++ 1.1 does not report, an error here
  /// (e.g. the connection died before COMMIT) is thrown through map_error.
  void run_simple(std::string_view sql, std::string_view statement);
  /// Server facts, read on first use.
  const server_traits& traits();

  /// When this connection was last used (for the idle pool's health check).
  std::chrono::steady_clock::time_point last_used() const noexcept { return last_used_; }

  /// The session's innodb_lock_wait_timeout set by sqllock (0: the server default; -1: unknown,
  /// the application's statements ran on it).
  int lock_timeout_s = 0;

 private:
  sql::PreparedStatement& prepare(std::string_view sql, std::string_view statement, bool lock_table);
  [[noreturn]] void fail(const sql::SQLException& e, std::string_view statement, bool lock_table);

  std::unique_ptr<sql::Connection> owned_;
  sql::Connection* conn_ = nullptr;
  bool broken_ = false;
  int socket_fd_ = -1;
  std::optional<server_traits> traits_;
  std::map<std::string, std::unique_ptr<sql::PreparedStatement>, std::less<>> cache_;
  std::chrono::steady_clock::time_point last_used_ = std::chrono::steady_clock::now();
};

/// Idle connections for transactions, at most two kept; shared by the backend and its sessions.
class connection_pool {
 public:
  explicit connection_pool(connect_params params) : params_(std::move(params)) {}
  /// An idle connection (checked if it idled a while) or a new one; autocommit off.
  std::unique_ptr<connection> take();
  /// Give a connection back after its transaction ended; broken ones are dropped.
  void give_back(std::unique_ptr<connection> c) noexcept;

 private:
  connect_params params_;
  idle_pool<std::unique_ptr<connection>> idle_;
};

/// A session over an owned pooled connection (begin) or an adopted application connection.
std::unique_ptr<session> make_owned_session(std::shared_ptr<connection_pool> pool, const transaction_options& options,
                                            const client_options& client);
std::unique_ptr<session> make_adopted_session(sql::Connection* c);

/// Embedded statement text of this dialect rendered for the lock table (cached by the caller).
std::string statement_text(std::string_view name, std::string_view table);

/// Microseconds to milliseconds, rounding toward negative infinity.
std::chrono::milliseconds floor_ms(std::int64_t us) noexcept;

/// `ms` rounded up to whole seconds (MySQL's wait bounds), 0 for ms <= 0, at most `cap`; never
/// overflows (milliseconds::max() means "no bound").
int whole_seconds_up(std::chrono::milliseconds ms, int cap) noexcept;

}  // namespace sqllock::detail::mysql
