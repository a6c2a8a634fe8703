// SQLite plumbing: statements run once, opening connections (durable, with sqllock's clock).
#include "sqlite/sqlite_connection.hpp"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

namespace sqllock::detail::sqlite {

busy_timeout_scope::busy_timeout_scope(sqlite3* db, std::int64_t ms) : db_(db) {
  sqlite3_busy_timeout(db_, static_cast<int>(std::clamp<std::int64_t>(ms, 0, 1 << 30)));
}

busy_timeout_scope::~busy_timeout_scope() { sqlite3_busy_timeout(db_, static_cast<int>(default_busy_timeout.count())); }

int begin_immediate(sqlite3* db, std::int64_t busy_ms) {
  busy_timeout_scope busy(db, busy_ms);
  return sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
}

statement_run::~statement_run() {
  sqlite3_reset(s_);
  sqlite3_clear_bindings(s_);
}

void statement_run::bind(int i, const value& v) {
  int rc = std::visit(
      [&](const auto& x) -> int {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return sqlite3_bind_null(s_, i);
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          return sqlite3_bind_int64(s_, i, x);
        } else if constexpr (std::is_same_v<T, double>) {
          return sqlite3_bind_double(s_, i, x);
        } else {
          return sqlite3_bind_text(s_, i, x.data(), static_cast<int>(x.size()), SQLITE_TRANSIENT);
        }
      },
      v);
  if (rc != SQLITE_OK) throw_error(db_, rc, name_);
}

void statement_run::bind_all(const std::vector<value>& params) {
  if (static_cast<int>(params.size()) != sqlite3_bind_parameter_count(s_)) {
    throw invalid_argument(name_ + ": " + std::to_string(sqlite3_bind_parameter_count(s_)) + " placeholders but " +
                           std::to_string(params.size()) + " values");
  }
  for (std::size_t i = 0; i < params.size(); ++i) bind(static_cast<int>(i + 1), params[i]);
}

bool statement_run::step(bool on_lock_table) {
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw_error(db_, rc, name_, on_lock_table);
}

std::optional<std::string> statement_run::text_at(int col) const {
  if (sqlite3_column_type(s_, col) == SQLITE_NULL) return std::nullopt;
  auto p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
  return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, col)));
}

result_row statement_run::row() const {
  result_row r;
  int n = sqlite3_column_count(s_);
  for (int i = 0; i < n; ++i) r.columns.push_back(text_at(i));
  return r;
}

result_rows statement_run::all() {
  result_rows out;
  while (step()) out.push_back(row());
  return out;
}

stmt_handle prepare(sqlite3* db, std::string_view sql, const std::string& name, bool persistent, bool on_lock_table) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), persistent ? SQLITE_PREPARE_PERSISTENT : 0,
                              &s, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(s);
    throw_error(db, rc, name, on_lock_table);
  }
  if (!s) throw invalid_argument(name + ": empty statement");
  return stmt_handle(s);
}

void exec(sqlite3* db, const char* sql, const std::string& name) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) throw_error(db, rc, name);
}

namespace {

// sqllock_now_ms(): the machine's real-time clock in milliseconds since the epoch. It is read by a
// raw system call, not through libc, so a process running under a clock-shifting preload
// (libfaketime) still agrees with every other process on the machine: on SQLite the database clock
// is the kernel's, whatever a process believes the time to be.
void now_ms_function(sqlite3_context* ctx, int, sqlite3_value**) {
  const std::int64_t ms = now_ms();
  if (ms < 0) {
    sqlite3_result_error(ctx, "sqllock_now_ms: clock_gettime failed", -1);
    return;
  }
  sqlite3_result_int64(ctx, ms);
}

}  // namespace

std::int64_t now_ms() {
  struct timespec ts {};
  if (syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts) != 0) return -1;
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

void register_clock(sqlite3* db) {
  const int rc = sqlite3_create_function(db, "sqllock_now_ms", 0, SQLITE_UTF8 | SQLITE_DIRECTONLY, nullptr,
                                         now_ms_function, nullptr, nullptr);
  if (rc != SQLITE_OK) throw_error(db, rc, "register_clock");
}

db_handle open_db(const std::string& path, bool uri, bool read_only, bool create) {
  sqlite3* raw = nullptr;
  const int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0)) |
                    SQLITE_OPEN_NOMUTEX | (uri ? SQLITE_OPEN_URI : 0);
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  db_handle db(raw);
  if (rc != SQLITE_OK) {
    throw connection_lost("sqlite: cannot open '" + path + "': " + (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)),
                          kind_name, std::to_string(rc), "open");
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, static_cast<int>(default_busy_timeout.count()));
  register_clock(raw);
  // Durable commits: in WAL mode, FULL syncs the WAL at every commit (NORMAL only at checkpoints,
  // so a power cut could undo an acknowledged acquisition). A connection setting.
  if (!read_only) exec(raw, "PRAGMA synchronous=FULL", "synchronous");
  return db;
}

}  // namespace sqllock::detail::sqlite
