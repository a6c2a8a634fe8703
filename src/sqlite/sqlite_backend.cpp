// The SQLite backend: lease statements, BEGIN IMMEDIATE transactions, OFD file-lock wake-ups.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "core/backend.hpp"
#include "sqllock/sqlite.hpp"

namespace sqllock::detail {
namespace {

constexpr const char* kind_name = "sqlite";
constexpr auto default_busy_timeout = std::chrono::milliseconds(5000);
// Lease statements wait only briefly for another connection's write lock: an acquire that meets
// one reports "not acquired" so the caller's own wait bound holds (a process paused in the middle
// of a write transaction must not stretch every try_acquire to the busy timeout); renew and release
// give up after a second so one stalled writer cannot freeze the watchdog.
constexpr int acquire_busy_ms = 50;
constexpr int renew_release_busy_ms = 1000;

// The one place SQLite result codes become typed errors.
[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const std::string& statement, bool on_lock_table = false) {
  const int primary = rc & 0xff;
  std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string text = "sqlite: " + statement + ": " + msg;
  std::string code = std::to_string(rc);
  switch (primary) {
    case SQLITE_BUSY:
      if (rc == SQLITE_BUSY_SNAPSHOT) throw serialization_failure(text, kind_name, code, statement);
      throw lock_not_available(text, kind_name, code, statement);
    case SQLITE_LOCKED:
      throw deadlock_detected(text, kind_name, code, statement);
    case SQLITE_INTERRUPT:
      throw query_canceled(text, kind_name, code, statement);
    case SQLITE_CANTOPEN:
    case SQLITE_NOTADB:
    case SQLITE_IOERR:
      throw connection_lost(text, kind_name, code, statement);
    case SQLITE_ERROR:
      if (on_lock_table && msg.find("no such table") != std::string::npos) {
        throw schema_missing("sqlite: the lock tables are missing: run `sqllock migrate` first", kind_name, code,
                             statement);
      }
      break;
    default:
      break;
  }
  throw database_error(text, kind_name, code, statement);
}

struct db_closer {
  void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
using db_handle = std::unique_ptr<sqlite3, db_closer>;

struct stmt_finalizer {
  void operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }
};
using stmt_handle = std::unique_ptr<sqlite3_stmt, stmt_finalizer>;

// Sets a connection's busy timeout for one scope, then restores the default.
class busy_timeout_scope {
 public:
  busy_timeout_scope(sqlite3* db, int ms) : db_(db) { sqlite3_busy_timeout(db_, ms); }
  busy_timeout_scope(const busy_timeout_scope&) = delete;
  busy_timeout_scope& operator=(const busy_timeout_scope&) = delete;
  ~busy_timeout_scope() { sqlite3_busy_timeout(db_, static_cast<int>(default_busy_timeout.count())); }

 private:
  sqlite3* db_;
};

// BEGIN IMMEDIATE (take the write lock now), waiting up to busy_ms for another connection's.
int begin_immediate(sqlite3* db, std::int64_t busy_ms) {
  busy_timeout_scope busy(db, static_cast<int>(std::clamp<std::int64_t>(busy_ms, 0, 1 << 30)));
  return sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
}

// A prepared statement run once: bind, step through rows, reset on every exit path.
class statement_run {
 public:
  statement_run(sqlite3* db, sqlite3_stmt* s, std::string name) : db_(db), s_(s), name_(std::move(name)) {}
  statement_run(const statement_run&) = delete;
  statement_run& operator=(const statement_run&) = delete;
  ~statement_run() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  void bind(int i, const value& v) {
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
    if (rc != SQLITE_OK) throw_sqlite(db_, rc, name_);
  }
  void bind_all(const std::vector<value>& params) {
    if (static_cast<int>(params.size()) != sqlite3_bind_parameter_count(s_)) {
      throw invalid_argument(name_ + ": " + std::to_string(sqlite3_bind_parameter_count(s_)) +
                             " placeholders but " + std::to_string(params.size()) + " values");
    }
    for (std::size_t i = 0; i < params.size(); ++i) bind(static_cast<int>(i + 1), params[i]);
  }
  // Next row: true while rows come.
  bool step(bool on_lock_table = false) {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw_sqlite(db_, rc, name_, on_lock_table);
  }
  std::int64_t int_at(int col) const { return sqlite3_column_int64(s_, col); }
  std::optional<std::string> text_at(int col) const {
    if (sqlite3_column_type(s_, col) == SQLITE_NULL) return std::nullopt;
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, col)));
  }
  result_row row() const {
    result_row r;
    int n = sqlite3_column_count(s_);
    for (int i = 0; i < n; ++i) r.columns.push_back(text_at(i));
    return r;
  }
  result_rows all() {
    result_rows out;
    while (step()) out.push_back(row());
    return out;
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_;
  std::string name_;
};

stmt_handle prepare(sqlite3* db, std::string_view sql, const std::string& name, bool persistent,
                    bool on_lock_table = false) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                              persistent ? SQLITE_PREPARE_PERSISTENT : 0, &s, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(s);
    throw_sqlite(db, rc, name, on_lock_table);
  }
  if (!s) throw invalid_argument(name + ": empty statement");
  return stmt_handle(s);
}

void exec(sqlite3* db, const char* sql, const std::string& name) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(db, rc, name);
}

// sqllock_now_ms(): the machine's real-time clock in milliseconds since the epoch. It is read by a
// raw system call, not through libc, so a process running under a clock-shifting preload
// (libfaketime) still agrees with every other process on the machine: on SQLite the database clock
// is the kernel's, whatever a process believes the time to be.
void sqlite_now_ms(sqlite3_context* ctx, int, sqlite3_value**) {
  struct timespec ts {};
  if (syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts) != 0) {
    sqlite3_result_error(ctx, "sqllock_now_ms: clock_gettime failed", -1);
    return;
  }
  sqlite3_result_int64(ctx, static_cast<sqlite3_int64>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000);
}

db_handle open_db(const std::string& path, bool uri) {
  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | (uri ? SQLITE_OPEN_URI : 0);
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  db_handle db(raw);
  if (rc != SQLITE_OK) {
    throw connection_lost("sqlite: cannot open '" + path + "': " + (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)),
                          kind_name, std::to_string(rc), "open");
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, static_cast<int>(default_busy_timeout.count()));
  rc = sqlite3_create_function(raw, "sqllock_now_ms", 0, SQLITE_UTF8 | SQLITE_DIRECTONLY, nullptr, sqlite_now_ms,
                               nullptr, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(raw, rc, "register_clock");
  return db;
}

std::string json_string(std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// ---- Transactions ----

// A transaction on its own connection (or a borrowed one). BEGIN IMMEDIATE is sent lazily, so
// that a first lock_rows can apply its own wait bound and report "not available" as a result.
class sqlite_session final : public session {
 public:
  sqlite_session(sqlite3* db, std::function<void(sqlite3*, bool)> give_back, transaction_options options,
                 bool borrowed, client_options log_options)
      : db_(db),
        give_back_(std::move(give_back)),
        options_(options),
        borrowed_(borrowed),
        log_options_(std::move(log_options)) {}

  ~sqlite_session() override { rollback(); }

  void commit() override {
    if (finished_) throw invalid_argument("transaction already finished");
    finished_ = true;
    if (!borrowed_ && begun_) {
      int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) {
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
        hand_back(false);
        throw_sqlite(db_, rc, "commit");
      }
    }
    hand_back(true);
  }

  void rollback() noexcept override {
    if (finished_) return;
    finished_ = true;
    bool healthy = true;
    if (!borrowed_ && begun_) {
      int rc = sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      if (rc != SQLITE_OK) {
        healthy = false;
        log_message(log_options_, log_level::error, std::string("sqlite: rollback failed: ") + sqlite3_errmsg(db_));
      }
    }
    hand_back(healthy);
  }

  std::int64_t execute(std::string_view sql, const std::vector<value>& params) override {
    ensure_begun(options_.lock_timeout);
    auto s = prepare(db_, sql, "execute", false);
    statement_run run(db_, s.get(), "execute");
    run.bind_all(params);
    while (run.step()) {
    }
    return sqlite3_changes64(db_);
  }

  result_rows query(std::string_view sql, const std::vector<value>& params) override {
    ensure_begun(options_.lock_timeout);
    auto s = prepare(db_, sql, "query", false);
    statement_run run(db_, s.get(), "query");
    run.bind_all(params);
    return run.all();
  }

  cas_result cas(const cas_request& r) override {
    ensure_begun(options_.lock_timeout);
    const std::string table = quote_identifier(r.table, dialect::sqlite);
    const std::string version = quote_identifier(r.version_column, dialect::sqlite);
    std::string where;
    std::vector<value> key_params;
    for (const auto& [col, v] : r.key) {
      where += (where.empty() ? "" : " AND ") + quote_identifier(col, dialect::sqlite) + " = ?";
      key_params.push_back(v);
    }
    std::string sql = "UPDATE " + table + " SET ";
    std::vector<value> params;
    for (const auto& [col, v] : r.set) {
      sql += quote_identifier(col, dialect::sqlite) + " = ?, ";
      params.push_back(v);
    }
    sql += version + " = " + version + " + 1 WHERE " + where + " AND " + version + " = ? RETURNING " + version;
    params.insert(params.end(), key_params.begin(), key_params.end());
    params.push_back(r.expected_version);
    {
      auto s = prepare(db_, sql, "cas_update", false);
      statement_run run(db_, s.get(), "cas_update");
      run.bind_all(params);
      if (run.step()) return {cas_result::status::applied, run.int_at(0)};
    }
    auto s = prepare(db_, "SELECT " + version + " FROM " + table + " WHERE " + where, "cas_read", false);
    statement_run run(db_, s.get(), "cas_read");
    run.bind_all(key_params);
    if (run.step()) return {cas_result::status::conflict, run.int_at(0)};
    return {cas_result::status::missing, 0};
  }

  row_lock_result lock_rows(const row_lock_request& r) override {
    if (borrowed_) {
      // The application owns the transaction: it must already hold the write lock.
      if (sqlite3_txn_state(db_, nullptr) != SQLITE_TXN_WRITE) {
        throw invalid_argument(
            "lock_rows on an adopted SQLite connection needs the application's transaction to hold the write "
            "lock (BEGIN IMMEDIATE)");
      }
    } else if (!begun_) {
      std::optional<std::chrono::milliseconds> wait = options_.lock_timeout;
      if (r.mode != lock_wait::wait) wait = std::chrono::milliseconds(0);
      if (r.timeout) wait = r.mode == lock_wait::wait ? *r.timeout : std::chrono::milliseconds(0);
      try {
        ensure_begun(wait);
      } catch (const lock_not_available&) {
        // SQLite locks the whole database: nothing is free, so SKIP LOCKED yields no rows.
        if (r.mode == lock_wait::skip_locked) return {row_lock_result::status::acquired, {}};
        return {row_lock_result::status::not_available, {}};
      }
    }
    const std::string key = quote_identifier(r.key_column, dialect::sqlite);
    std::string cols;
    for (const auto& c : r.columns) cols += (cols.empty() ? "" : ", ") + quote_identifier(c, dialect::sqlite);
    if (cols.empty()) cols = key;
    std::string in;
    for (std::size_t i = 0; i < r.keys.size(); ++i) in += i ? ", ?" : "?";
    auto s = prepare(db_,
                     "SELECT " + cols + " FROM " + quote_identifier(r.table, dialect::sqlite) + " WHERE " + key +
                         " IN (" + in + ") ORDER BY " + key,
                     "lock_rows", false);
    statement_run run(db_, s.get(), "lock_rows");
    run.bind_all(r.keys);
    return {row_lock_result::status::acquired, run.all()};
  }

 private:
  void ensure_begun(std::optional<std::chrono::milliseconds> wait) {
    if (finished_) throw invalid_argument("transaction already finished");
    if (borrowed_ || begun_) return;
    const int rc = begin_immediate(db_, wait.value_or(default_busy_timeout).count());
    if (rc != SQLITE_OK) {
      if ((rc & 0xff) == SQLITE_BUSY) {
        throw lock_not_available("sqlite: the database is write-locked by another connection (BEGIN IMMEDIATE)",
                                 kind_name, std::to_string(rc), "begin_immediate");
      }
      throw_sqlite(db_, rc, "begin_immediate");
    }
    begun_ = true;
  }

  void hand_back(bool healthy) noexcept {
    if (give_back_) give_back_(db_, healthy);
    give_back_ = nullptr;
  }

  sqlite3* db_;
  std::function<void(sqlite3*, bool)> give_back_;
  transaction_options options_;
  bool borrowed_;
  client_options log_options_;
  bool begun_ = false;
  bool finished_ = false;
};

// ---- The backend ----

class sqlite_backend final : public backend {
 public:
  explicit sqlite_backend(const backend_config& config) : config_(config) {
    const auto& path = config.url.path;
    if (path == ":memory:") {
      // Every connection of this client must see the same in-memory database.
      std::random_device rd;
      open_path_ = "file:sqllock-memory-" + std::to_string(rd()) + std::to_string(rd()) + "?mode=memory&cache=shared";
      uri_ = true;
    } else {
      open_path_ = path;
      wait_file_ = path + "-sqllock-wait";
    }
    lease_db_ = open_db(open_path_, uri_);
    if (!uri_) {
      // WAL lets readers run beside the one writer; it is a property of the file, kept once set.
      sqlite3_exec(lease_db_.get(), "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
      sqlite3_exec(lease_db_.get(), "PRAGMA synchronous=NORMAL", nullptr, nullptr, nullptr);
    }
  }

  ~sqlite_backend() override {
    {
      std::lock_guard lk(probe_mu_);
      probe_stop_ = true;
    }
    probe_cv_.notify_all();
    if (prober_.joinable()) prober_.join();
    std::lock_guard lk(pool_mu_);
    for (auto* db : idle_) sqlite3_close_v2(db);
    if (hold_fd_ >= 0) close(hold_fd_);
    if (probe_fd_ >= 0) close(probe_fd_);
  }

  std::string_view kind() const noexcept override { return kind_name; }

  int schema_version() override {
    std::lock_guard lk(mu_);
    return schema_version_locked();
  }

  int migrate() override {
    std::lock_guard lk(mu_);
    sqlite3* db = lease_db_.get();
    // BEGIN IMMEDIATE makes concurrent migrators (other processes) take turns.
    const int rc = begin_immediate(db, 60000);
    if (rc != SQLITE_OK) throw_sqlite(db, rc, "migrate_begin");
    try {
      exec(db, sql("schema_table").c_str(), "schema_table");
      int current = schema_version_locked();
      for (const auto& m : embedded_migrations("sqlite")) {
        if (m.version <= current) continue;
        exec(db, render_sql(m.text, config_.options.table, dialect::sqlite).c_str(), std::string(m.file));
        auto s = prepare(db, sql("schema_record"), "schema_record", false);
        statement_run run(db, s.get(), "schema_record");
        run.bind(1, std::int64_t{m.version});
        run.bind(2, std::string(m.file));
        run.step();
        current = m.version;
      }
      exec(db, "COMMIT", "migrate_commit");
      statements_.clear();  // the schema changed: re-prepare
      return current;
    } catch (...) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  acquire_outcome acquire(const std::string& name, const std::string& holder,
                          std::chrono::milliseconds ttl) override {
    std::lock_guard lk(mu_);
    acquire_outcome out;
    try {
      busy_timeout_scope busy(lease_db_.get(), acquire_busy_ms);
      statement_run run = lease_statement("lease_acquire");
      run.bind(1, name);
      run.bind(2, holder);
      run.bind(3, std::int64_t{ttl.count()});
      count_statement();
      if (run.step(true)) {
        out.acquired = true;
        out.token = run.int_at(0);
        out.hold_count = run.int_at(1);
      }
    } catch (const lock_not_available&) {
      // Another connection holds the write lock: not acquired now. A WAL reader is never blocked
      // by the writer, so still say who holds the name (none or expired: the waiter retries soon).
    }
    if (out.acquired) {
      hold_wait_byte(name);
      return out;
    }
    try {
      busy_timeout_scope busy(lease_db_.get(), acquire_busy_ms);
      statement_run run = lease_statement("lease_holder");
      run.bind(1, name);
      if (run.step(true)) {
        out.holder = run.text_at(0).value_or("");
        out.time_left = std::chrono::milliseconds(run.int_at(1));
      }
    } catch (const lock_not_available&) {
      // Busy even for a reader (a shared-cache memory database): holder unknown, retry soon.
    }
    return out;
  }

  std::vector<std::size_t> renew(std::span<const renew_item> items) override {
    if (items.empty()) return {};
    std::string json = "[";
    std::map<std::pair<std::string, std::int64_t>, std::size_t> index;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto& it = items[i];
      if (i) json += ',';
      json += "[" + json_string(it.name) + "," + json_string(it.holder) + "," + std::to_string(it.token) + "," +
              std::to_string(it.ttl.count()) + "]";
      index[{it.name, it.token}] = i;
    }
    json += "]";
    std::lock_guard lk(mu_);
    busy_timeout_scope busy(lease_db_.get(), renew_release_busy_ms);
    statement_run run = lease_statement("lease_renew");
    run.bind(1, json);
    count_statement();
    std::vector<std::size_t> matched;
    while (run.step(true)) {
      auto f = index.find({run.text_at(0).value_or(""), run.int_at(1)});
      if (f != index.end()) matched.push_back(f->second);
    }
    return matched;
  }

  release_outcome release(const std::string& name, const std::string& holder, std::int64_t token,
                          std::optional<std::int64_t> expected_holds) override {
    std::lock_guard lk(mu_);
    release_outcome out;
    try {
      busy_timeout_scope busy(lease_db_.get(), renew_release_busy_ms);
      statement_run run = lease_statement("lease_release");
      run.bind(1, name);
      run.bind(2, holder);
      run.bind(3, token);
      if (expected_holds) run.bind(4, *expected_holds);  // unbound: NULL, any hold count
      count_statement();
      if (run.step(true)) {
        out.released = true;
        out.remaining_holds = run.int_at(0);
      }
    } catch (...) {
      drop_wait_byte(name);  // the lease will expire; its waiters must not wait for this client's exit
      throw;
    }
    drop_wait_byte(name);
    return out;
  }

  bool force_release(const std::string& name) override {
    std::lock_guard lk(mu_);
    statement_run run = lease_statement("lease_force_release");
    run.bind(1, name);
    count_statement();
    return run.step(true);
  }

  std::optional<lock_info> inspect(const std::string& name) override {
    std::lock_guard lk(mu_);
    statement_run run = lease_statement("lease_inspect");
    run.bind(1, name);
    count_statement();
    if (!run.step(true)) return std::nullopt;
    return info_from(run);
  }

  std::vector<lock_info> list_locks() override {
    std::lock_guard lk(mu_);
    statement_run run = lease_statement("lease_list");
    count_statement();
    std::vector<lock_info> out;
    while (run.step(true)) out.push_back(info_from(run));
    return out;
  }

  std::unique_ptr<session> begin(const transaction_options& options) override {
    sqlite3* db = nullptr;
    {
      std::lock_guard lk(pool_mu_);
      if (!idle_.empty()) {
        db = idle_.back();
        idle_.pop_back();
      }
    }
    if (!db) db = open_db(open_path_, uri_).release();
    auto give_back = [this](sqlite3* d, bool healthy) {
      std::lock_guard lk(pool_mu_);
      if (healthy && idle_.size() < 2 && sqlite3_get_autocommit(d)) {
        idle_.push_back(d);
      } else {
        sqlite3_close_v2(d);
      }
    };
    return std::make_unique<sqlite_session>(db, give_back, options, false, config_.options);
  }

  // Wake-ups: waiters probe the holder's byte-range lock on the sidecar file.
  void set_wake_sink(wake_sink* sink) override {
    std::lock_guard lk(probe_mu_);
    sink_ = sink;
  }

  void watch(const std::string& name) override {
    if (wait_file_.empty()) return;
    std::lock_guard lk(probe_mu_);
    if (probe_fd_ < 0) {
      probe_fd_ = open(wait_file_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (probe_fd_ < 0) return;  // no events; polling still works
    }
    watched_[name] = false;
    if (!prober_.joinable()) prober_ = std::thread([this] { probe_loop(); });
    probe_cv_.notify_all();
  }

  void unwatch(const std::string& name) override {
    std::lock_guard lk(probe_mu_);
    watched_.erase(name);
  }

 private:
  std::string sql(const char* name) const {
    return render_sql(embedded_sql("sqlite", name), config_.options.table, dialect::sqlite);
  }

  // A cached prepared lease statement, ready to bind. Called with mu_ held.
  statement_run lease_statement(const char* name) {
    auto it = statements_.find(name);
    if (it == statements_.end()) {
      it = statements_.emplace(name, prepare(lease_db_.get(), sql(name), name, true, true)).first;
    }
    return statement_run(lease_db_.get(), it->second.get(), name);
  }

  int schema_version_locked() {
    sqlite3* db = lease_db_.get();
    sqlite3_stmt* raw = nullptr;
    std::string text = sql("schema_version");
    int rc = sqlite3_prepare_v2(db, text.c_str(), -1, &raw, nullptr);
    stmt_handle s(raw);
    if (rc != SQLITE_OK) {
      if (std::string(sqlite3_errmsg(db)).find("no such table") != std::string::npos) return 0;
      throw_sqlite(db, rc, "schema_version");
    }
    statement_run run(db, s.get(), "schema_version");
    return run.step() ? static_cast<int>(run.int_at(0)) : 0;
  }

  static lock_info info_from(const statement_run& run) {
    lock_info i;
    i.name = run.text_at(0).value_or("");
    i.holder = run.text_at(1).value_or("");
    i.fencing_token = run.int_at(2);
    i.hold_count = run.int_at(3);
    i.time_left = std::chrono::milliseconds(run.int_at(4));
    return i;
  }

  off_t wait_byte(const std::string& name) const { return static_cast<off_t>(fnv1a(name) % (1u << 20)); }

  bool set_byte_lock(int fd, off_t off, short type, int cmd) const {
    struct flock fl;
    std::memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = off;
    fl.l_len = 1;
    return fcntl(fd, cmd, &fl) == 0;
  }

  // While any lease of this client hashes to a byte, hold a write lock on it. Called with mu_ held.
  void hold_wait_byte(const std::string& name) {
    if (wait_file_.empty() || !config_.options.notifications) return;
    if (hold_fd_ < 0) {
      hold_fd_ = open(wait_file_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (hold_fd_ < 0) return;
    }
    off_t off = wait_byte(name);
    if (held_bytes_[off]++ == 0) set_byte_lock(hold_fd_, off, F_WRLCK, F_OFD_SETLK);
  }

  void drop_wait_byte(const std::string& name) {
    if (hold_fd_ < 0) return;
    off_t off = wait_byte(name);
    auto it = held_bytes_.find(off);
    if (it == held_bytes_.end()) return;
    if (--it->second == 0) {
      held_bytes_.erase(it);
      set_byte_lock(hold_fd_, off, F_UNLCK, F_OFD_SETLK);
    }
  }

  // One thread per client: every 2 ms, check the byte of each watched name; a held -> free
  // transition means its holder released or died, so wake the local waiters at once.
  void probe_loop() {
    std::unique_lock lk(probe_mu_);
    while (!probe_stop_) {
      if (watched_.empty()) {
        probe_cv_.wait(lk);
        continue;
      }
      std::vector<std::string> freed;
      for (auto& [name, was_held] : watched_) {
        struct flock fl;
        std::memset(&fl, 0, sizeof fl);
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        fl.l_start = wait_byte(name);
        fl.l_len = 1;
        if (fcntl(probe_fd_, F_OFD_GETLK, &fl) != 0) continue;
        bool held_now = fl.l_type != F_UNLCK;
        if (was_held && !held_now) freed.push_back(name);
        was_held = held_now;
      }
      if (sink_) {
        for (const auto& n : freed) sink_->wake(n);
      }
      probe_cv_.wait_for(lk, std::chrono::milliseconds(2));
    }
  }

  backend_config config_;
  std::string open_path_;
  bool uri_ = false;
  std::string wait_file_;

  std::mutex mu_;  // the lease connection and its statements
  db_handle lease_db_;
  std::map<std::string, stmt_handle, std::less<>> statements_;
  int hold_fd_ = -1;
  std::map<off_t, int> held_bytes_;

  std::mutex pool_mu_;
  std::vector<sqlite3*> idle_;

  std::mutex probe_mu_;
  std::condition_variable probe_cv_;
  std::thread prober_;
  bool probe_stop_ = false;
  int probe_fd_ = -1;
  std::map<std::string, bool> watched_;
  wake_sink* sink_ = nullptr;
};

}  // namespace

std::unique_ptr<backend> make_sqlite_backend(const backend_config& config) {
  return std::make_unique<sqlite_backend>(config);
}

}  // namespace sqllock::detail

namespace sqllock {

transaction adopt(sqlite3* connection) {
  if (!connection) throw invalid_argument("adopt: null sqlite3 handle");
  return transaction(std::make_unique<detail::sqlite_session>(connection, nullptr, transaction_options{}, true,
                                                              client_options{}));
}

}  // namespace sqllock
