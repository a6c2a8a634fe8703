// Internals of the MySQL/MariaDB backend: connections, statement running, error mapping, sessions.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend.hpp"
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
[[noreturn]] void map_error(const sql::SQLException& e, std::string_view statement,
                            bool lock_table_statement = false);

/// True for the vendor codes that mean the connection is gone.
bool is_connection_error(int code) noexcept;

/// The server text of an error with every quoted literal replaced (values never leak).
std::string redact_server_message(std::string_view message);

/// Facts about the server learned once per connection.
struct server_traits {
  bool mariadb = true;
  int major = 0;  ///< from VERSION(), e.g. 10 and 11 for "10.11.6-MariaDB"
  int minor = 0;
  bool rollback_on_timeout = false;
  std::string database;  ///< current database ("" if none)
};

/// Where and how to connect (from the URL); never printed except through url.redacted().
struct connect_params {
  database_url url;
  int connect_timeout_s = 10;
};

/// Open a connection. found_rows: CLIENT_FOUND_ROWS (affected rows = matched rows).
/// read_timeout_s 0: none. Throws connection_lost (unreachable) or invalid_argument (bad option).
std::unique_ptr<sql::Connection> open_connection(const connect_params& params, bool found_rows,
                                                 int read_timeout_s);

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

  /// Run a statement with `?` placeholders; returns the affected (or, with CLIENT_FOUND_ROWS,
  /// matched) row count. Errors go through map_error with the statement name.
  std::int64_t execute(std::string_view sql, const std::vector<value>& params,
                       std::string_view statement, bool lock_table = false);
  /// Run a query; every column as text, NULL as nullopt.
  result_rows query(std::string_view sql, const std::vector<value>& params,
                    std::string_view statement, bool lock_table = false);
  /// Run a statement without parameters through the text protocol (COMMIT, ROLLBACK): unlike
  /// sql::Connection::commit(), whose failure Connector/C++ 1.1 does not report, an error here
  /// (e.g. the connection died before COMMIT) is thrown through map_error.
  void run_simple(std::string_view sql, std::string_view statement);
  /// Server facts, read on first use.
  const server_traits& traits();

  /// When this connection was last used (for the idle pool's health check).
  std::chrono::steady_clock::time_point last_used() const noexcept { return last_used_; }

  /// The session's innodb_lock_wait_timeout set by sqllock (0: the server default).
  int lock_timeout_s = 0;

 private:
  sql::PreparedStatement& prepare(std::string_view sql, std::string_view statement,
                                  bool lock_table);
  [[noreturn]] void fail(const sql::SQLException& e, std::string_view statement, bool lock_table);

  std::unique_ptr<sql::Connection> owned_;
  sql::Connection* conn_ = nullptr;
  bool broken_ = false;
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
  std::mutex mutex_;
  std::vector<std::unique_ptr<connection>> idle_;
};

/// A session over an owned pooled connection (begin) or an adopted application connection.
std::unique_ptr<session> make_owned_session(std::shared_ptr<connection_pool> pool,
                                            const transaction_options& options,
                                            const client_options& client);
std::unique_ptr<session> make_adopted_session(sql::Connection* c);

/// Embedded statement text of this dialect rendered for the lock table (cached by the caller).
std::string statement_text(std::string_view name, std::string_view table);

/// Microseconds to milliseconds, rounding toward negative infinity.
std::chrono::milliseconds floor_ms(std::int64_t us) noexcept;

/// Split a migration file into statements at `;` ending a line (outside quotes).
std::vector<std::string> split_statements(std::string_view text);


}  // namespace sqllock::detail::mysql
