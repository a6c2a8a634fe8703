// SQLite plumbing: owned handles, prepared statements run once, opening a connection, the clock.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/backend.hpp"

namespace sqllock::detail::sqlite {

inline constexpr const char* kind_name = "sqlite";
/// How long a statement of a transaction waits for another connection's write lock by default.
inline constexpr auto default_busy_timeout = std::chrono::milliseconds(5000);

/// THE error mapping of this backend: throws the typed sqllock error for a result code.
[[noreturn]] void throw_error(sqlite3* db, int rc, const std::string& statement, bool on_lock_table = false);

struct db_closer {
  void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
using db_handle = std::unique_ptr<sqlite3, db_closer>;

struct stmt_finalizer {
  void operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }
};
using stmt_handle = std::unique_ptr<sqlite3_stmt, stmt_finalizer>;

/// Sets a connection's busy timeout for one scope, then restores the default.
class busy_timeout_scope {
 public:
  busy_timeout_scope(sqlite3* db, std::int64_t ms);
  busy_timeout_scope(const busy_timeout_scope&) = delete;
  busy_timeout_scope& operator=(const busy_timeout_scope&) = delete;
  ~busy_timeout_scope();

 private:
  sqlite3* db_;
};

/// BEGIN IMMEDIATE (take the write lock now), waiting up to busy_ms for another connection's.
int begin_immediate(sqlite3* db, std::int64_t busy_ms);

/// A prepared statement run once: bind, step through rows, reset on every exit path.
class statement_run {
 public:
  statement_run(sqlite3* db, sqlite3_stmt* s, std::string name) : db_(db), s_(s), name_(std::move(name)) {}
  statement_run(const statement_run&) = delete;
  statement_run& operator=(const statement_run&) = delete;
  ~statement_run();
  void bind(int i, const value& v);
  void bind_all(const std::vector<value>& params);
  /// Next row: true while rows come.
  bool step(bool on_lock_table = false);
  std::int64_t int_at(int col) const { return sqlite3_column_int64(s_, col); }
  std::optional<std::string> text_at(int col) const;
  result_row row() const;
  result_rows all();

 private:
  sqlite3* db_;
  sqlite3_stmt* s_;
  std::string name_;
};

stmt_handle prepare(sqlite3* db, std::string_view sql, const std::string& name, bool persistent,
                    bool on_lock_table = false);
void exec(sqlite3* db, const char* sql, const std::string& name);

/// Open a connection: extended result codes, the default busy timeout, sqllock_now_ms(), and
/// `synchronous = FULL` so that a commit is on disk before sqllock reports it (an acquisition lost
/// in a power cut would hand its fencing token out again). read_only: no create, no writes;
/// create: a missing file is created (else it is an error).
db_handle open_db(const std::string& path, bool uri, bool read_only, bool create = true);

/// The lease statements' clock: the kernel's real-time clock in milliseconds since the epoch, read
/// by a raw system call (see sqllock_now_ms() in sqlite_connection.cpp).
std::int64_t now_ms();

/// Register sqllock_now_ms() (the lease statements' clock) on a connection.
void register_clock(sqlite3* db);

/// A transaction on `db`, handed back through `give_back(db, healthy)` when it ends
/// (sqlite_session.cpp).
std::unique_ptr<session> make_session(sqlite3* db, std::function<void(sqlite3*, bool)> give_back,
                                      const transaction_options& options, const client_options& log_options);


}  // namespace sqllock::detail::sqlite
