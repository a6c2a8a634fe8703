// Shared pieces of the PostgreSQL backend: libpq handles, connecting, running statements, errors.
#pragma once

#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/backend.hpp"
#include "core/idle_pool.hpp"
#include "core/text.hpp"
#include "sqllock/error.hpp"
#include "sqllock/parse.hpp"
#include "sqllock/value.hpp"

namespace sqllock::detail::pg {

inline constexpr std::string_view backend_name = "postgresql";

/// Owns a PGresult.
struct result_deleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using result_ptr = std::unique_ptr<PGresult, result_deleter>;

/// Owns a PGconn.
struct conn_deleter {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
using conn_ptr = std::unique_ptr<PGconn, conn_deleter>;

/// How to reach the server: the URL as libpq keywords, plus whatever the backend adds.
struct conn_target {
  std::string url;       ///< the URL for libpq (contains the password: never log it)
  std::string redacted;  ///< the URL without password, for messages
  database_url source;   ///< the parsed URL: its secrets are scrubbed from libpq's messages
  /// Bound on making a connection: the URL's connect_timeout (seconds), else 10 s.
  std::chrono::milliseconds connect_timeout{10000};
  /// Ask for READ COMMITTED in the startup packet (`options=-c default_transaction_isolation=...`),
  /// whatever the server's default: the lease statements are written for it. Every connection also
  /// asks for server-side TCP keepalives (see postgresql_connection.cpp). A URL's own `options`
  /// win. A pooler that refuses startup options (PgBouncer) gets none, once and for all; the lease
  /// statements then retry a serialization failure, which in their one-statement transactions
  /// means nothing was applied.
  bool pin_read_committed = false;
  std::shared_ptr<std::atomic<bool>> startup_options_refused = std::make_shared<std::atomic<bool>>(false);
};

/// Check a URL with PQconninfoParse; throws invalid_argument without echoing the password.
void validate_conninfo(const database_url& url);

/// Open a connection, waiting at most `timeout` (and the target's connect_timeout). Throws
/// connection_lost with the server's reason on failure. Server notices go to `log` (debug level;
/// it must outlive the connection), never to stderr.
conn_ptr connect(const conn_target& target, const client_options* log,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

/// The result of the command just sent on `conn`, waiting at most until `deadline` (poll() on the
/// socket). No answer in time: throws connection_lost; the caller must close the connection (its
/// protocol state is unknown). Extra results of the command are drained.
result_ptr await_result(PGconn* conn, std::string_view statement, std::chrono::steady_clock::time_point deadline);

/// exec_simple with a deadline (LISTEN/UNLISTEN on the notification connection).
void exec_simple_until(PGconn* conn, std::string_view sql, std::string_view statement,
                       std::chrono::steady_clock::time_point deadline);

/// False when the server has already ended this idle connection (its FATAL message and EOF are
/// waiting in the socket); reads pending input without blocking.
bool idle_connection_alive(PGconn* conn);

/// THE error mapping of this backend: throws the typed sqllock error for a failed result (or for a
/// failure with no result, from the connection's state). `statement` is the sqllock statement
/// name; values and passwords never appear in the message.
[[noreturn]] void throw_error(PGconn* conn, const PGresult* result, std::string_view statement);

/// The SQLSTATE of a failed result ("" if none).
std::string sqlstate(const PGresult* result);

/// True when the connection is unusable (CONNECTION_BAD) or the error says the session ended.
bool connection_failed(PGconn* conn, const PGresult* result);

/// Parameters bound as text (nullopt: NULL).
using text_params = std::vector<std::optional<std::string>>;

/// exec_params with a deadline: no answer in time throws connection_lost (close the connection).
result_ptr exec_params_until(PGconn* conn, std::string_view sql, const text_params& params, std::string_view statement,
                             std::chrono::steady_clock::time_point deadline);

/// Run a statement with text parameters (unnamed, PQexecParams); throws the mapped error unless
/// the result is PGRES_COMMAND_OK or PGRES_TUPLES_OK.
result_ptr exec_params(PGconn* conn, std::string_view sql, const text_params& params, std::string_view statement);

/// Run simple-protocol SQL (may hold several statements; no parameters). Returns every result;
/// throws the mapped error at the first failed one (after draining the rest).
std::vector<result_ptr> exec_simple(PGconn* conn, std::string_view sql, std::string_view statement);

/// Text form of a value for a text parameter (monostate: nullopt).
std::optional<std::string> to_text(const value& v);

/// A PostgreSQL array literal ({"a","b",NULL}) of text elements.
std::string array_literal(const std::vector<std::optional<std::string>>& elements);

/// A wait bound as a lock_timeout / statement_timeout value: at least 1 ms (0 would mean no bound),
/// and "0" (no bound) past what the setting can hold (2^31-1 ms, about 24.8 days).
std::string timeout_text(std::chrono::milliseconds t);

/// Rewrite `?` placeholders to $1..$n outside quotes, quoted identifiers, comments and
/// dollar-quoted strings. Returns the rewritten text and the number of placeholders.
std::pair<std::string, std::size_t> rewrite_placeholders(std::string_view sql);


/// The LISTEN/NOTIFY channel of a lock name: "sqllock_" + 16 hex digits of a hash of table and name.
std::string channel_for(std::string_view table, std::string_view name);

/// Field i of row r as text ("" when NULL), as int64 (0 when NULL), or as optional.
std::string field_text(const PGresult* r, int row, int col);
std::int64_t field_int(const PGresult* r, int row, int col);
std::optional<std::string> field_opt(const PGresult* r, int row, int col);

/// All rows of a result as sqllock result rows.
result_rows to_rows(const PGresult* r);

/// A session (one transaction) on a connection; adopted ones never begin, end or close it.
class connection_pool;
std::unique_ptr<session> make_session(std::shared_ptr<connection_pool> pool, conn_ptr conn,
                                      const client_options& options);
std::unique_ptr<session> make_adopted_session(PGconn* conn);

/// Up to two idle transaction connections kept for reuse.
class connection_pool {
 public:
  connection_pool(conn_target target, client_options options)
      : target_(std::move(target)), options_(std::move(options)) {}
  ~connection_pool();
  /// An idle connection (second: true when it came from the pool) or a new one.
  std::pair<conn_ptr, bool> take();
  /// Give a connection back (kept only if healthy, idle and there is room).
  void give_back(conn_ptr conn) noexcept;
  const conn_target& target() const noexcept { return target_; }
  const client_options& options() const noexcept { return options_; }

 private:
  conn_target target_;
  client_options options_;
  idle_pool<conn_ptr> idle_;
};

}  // namespace sqllock::detail::pg
