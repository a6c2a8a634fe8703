// The SQLite backend: lease statements on two connections (callers, watchdog), migrations, sessions.
#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>

#include "core/fifo_mutex.hpp"
#include "core/idle_pool.hpp"
#include "core/text.hpp"
#include "sqlite/sqlite_connection.hpp"
#include "sqlite/sqlite_waker.hpp"

namespace sqllock::detail::sqlite {
namespace {

// Lease statements wait only briefly for another connection's write lock: an acquire that meets
// one reports "not acquired" so the caller's own wait bound holds (a process paused in the middle
// of a write transaction must not stretch every try_acquire to the busy timeout); renew and release
// give up after a second (or their deadline) so one stalled writer cannot freeze the watchdog.
constexpr std::int64_t acquire_busy_ms = 50;
constexpr std::int64_t renew_release_busy_ms = 1000;

/// One connection for lease statements and its cached prepared statements.
struct lane_connection {
  db_handle db;
  std::map<std::string, stmt_handle, std::less<>> statements;
};

class sqlite_backend final : public backend {
 public:
  explicit sqlite_backend(const backend_config& config) : config_(config), table_(config.options.table) {
    const auto& path = config.url.path;
    if (path == ":memory:") {
      // Every connection of this client must see the same in-memory database.
      std::random_device rd;
      open_path_ = "file:sqllock-memory-" + std::to_string(rd()) + std::to_string(rd()) + "?mode=memory&cache=shared";
      uri_ = true;
    } else {
      open_path_ = path;
      waker_ = std::make_unique<waker>(config.options.read_only ? std::string() : path + "-sqllock-wait");
    }
    if (!waker_) waker_ = std::make_unique<waker>(std::string());
    // A client that needs the lock tables can never use a file that does not exist yet: say so
    // instead of creating an empty database (only migrate, with require_schema off, creates one).
    // A read-only client never creates one either.
    if (!uri_ && (read_only() || config.options.require_schema)) {
      std::error_code ec;
      if (!std::filesystem::exists(path, ec) && !ec) {
        throw schema_missing("sqlite: the database file '" + path + "' does not exist: run `sqllock migrate` first",
                             kind_name, "", "open");
      }
    }
    caller_.db = open_db(open_path_, uri_, read_only(), !config.options.require_schema);
    wal_pending_ = !uri_ && !read_only();
    switch_to_wal_locked(default_busy_timeout.count());
    watchdog_.db = open_db(open_path_, uri_, read_only(), !config.options.require_schema);
  }

  ~sqlite_backend() override { waker_.reset(); }

  sqllock::dialect dialect() const noexcept override { return sqllock::dialect::sqlite; }

  int schema_version() override {
    std::lock_guard lk(caller_mu_);
    return schema_version_locked();
  }

  int migrate() override {
    if (read_only()) throw invalid_argument("sqlite: migrate needs a client that is not read-only");
    std::lock_guard lk(caller_mu_);
    sqlite3* db = caller_.db.get();
    // BEGIN IMMEDIATE makes concurrent migrators (other processes) take turns.
    const int rc = begin_immediate(db, 60000);
    if (rc != SQLITE_OK) throw_error(db, rc, "migrate_begin");
    try {
      exec(db, sql("schema_table").c_str(), "schema_table");
      // A dropped lock table (its version rows still there) is created again from the first step.
      int current = schema_version_locked();
      for (const auto& m : embedded_migrations(sqllock::dialect::sqlite)) {
        if (m.version <= current) continue;
        exec(db, render_sql(m.text, table_, sqllock::dialect::sqlite).c_str(), std::string(m.file));
        auto s = prepare(db, sql("schema_record"), "schema_record", false);
        statement_run run(db, s.get(), "schema_record");
        run.bind(1, std::int64_t{m.version});
        run.bind(2, std::string(m.file));
        run.step();
        current = m.version;
      }
      exec(db, "COMMIT", "migrate_commit");
      caller_.statements.clear();  // the schema changed: prepare again
      std::lock_guard<fifo_mutex> wk(watchdog_mu_);
      watchdog_.statements.clear();
      return current;
    } catch (...) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  acquire_outcome acquire(const acquire_request& req) override {
    std::unique_lock lk(caller_mu_, std::defer_lock);
    if (!lk.try_lock_until(req.lane_until())) return {};  // the connection stayed busy: not acquired now
    switch_to_wal_locked(0);
    acquire_outcome out;
    const auto started = steady::now();
    out.started = started;
    const auto busy = std::min(acquire_busy_ms, time_until(req.deadline, std::chrono::milliseconds(1)).count());
    try {
      if (!req.fence.empty()) {
        out = acquire_fenced(req, busy);
        out.started = started;
      } else {
        busy_timeout_scope scope(caller_.db.get(), busy);
        statement_run run = lease_statement(caller_, "lease_acquire");
        run.bind(1, req.name);
        run.bind(2, req.holder);
        run.bind(3, req.owner);
        run.bind(4, std::int64_t{req.ttl.count()});
        count_statement();
        if (run.step(true)) {
          out.acquired = true;
          out.token = run.int_at(0);
        }
      }
    } catch (const lock_not_available&) {
      // Another connection holds the write lock: not acquired now. A WAL reader is never blocked
      // by the writer, so still say who holds the name (none or expired: the waiter retries soon).
    }
    if (out.acquired) {
      waker_->hold(req.name, req.owner);
      return out;
    }
    try {
      busy_timeout_scope scope(caller_.db.get(), busy);
      statement_run run = lease_statement(caller_, "lease_holder");
      run.bind(1, req.name);
      if (run.step(true)) {
        out.holder = run.text_at(0).value_or("");
        out.time_left = std::chrono::milliseconds(std::max<std::int64_t>(0, run.int_at(1)));
      }
    } catch (const lock_not_available&) {
      // Busy even for a reader (a shared-cache memory database): holder unknown, retry soon.
    }
    return out;
  }

  std::vector<std::size_t> renew(std::span<const renew_item> items, steady::time_point deadline) override {
    if (items.empty()) return {};
    std::string json = "[";
    std::map<std::string, std::size_t, std::less<>> index;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto& it = items[i];
      if (i) json += ',';
      json += "[" + json_quote(it.lease.name) + "," + json_quote(it.lease.owner) + "," +
              std::to_string(it.lease.token) + "," + std::to_string(it.ttl.count()) + "]";
      index[it.lease.name] = i;
    }
    json += "]";
    auto lk = lock_lane(watchdog_mu_, deadline, kind_name, "lease_renew");
    busy_timeout_scope scope(watchdog_.db.get(), std::min(renew_release_busy_ms,
                                                          time_until(deadline, std::chrono::milliseconds(1)).count()));
    statement_run run = lease_statement(watchdog_, "lease_renew");
    run.bind(1, json);
    count_statement();
    std::vector<std::size_t> matched;
    while (run.step(true)) {
      auto f = index.find(run.text_at(0).value_or(""));
      if (f != index.end()) matched.push_back(f->second);
    }
    std::sort(matched.begin(), matched.end());
    return matched;
  }

  release_outcome release(const release_request& req, lane on) override {
    auto run_on = [&](lane_connection& l) {
      if (req.hand_over) {
        // Hand-over or free, then the releaser's ticket; both in one write transaction.
        if (begin_immediate(l.db.get(), std::min(renew_release_busy_ms,
                                                 time_until(req.deadline, std::chrono::milliseconds(1)).count())) !=
            SQLITE_OK) {
          throw lock_not_available("sqlite: the database stayed write-locked by another connection (fair_release)",
                                   std::string(kind_name), "", "fair_release");
        }
        try {
          bool found = false;
          {
            statement_run run = lease_statement(l, "fair_release");
            run.bind(1, req.lease.name);
            run.bind(2, req.lease.owner);
            run.bind(3, req.lease.token);
            count_statement();
            found = run.step(true);
          }
          {
            statement_run leave = lease_statement(l, "queue_leave");
            leave.bind(1, req.lease.owner);
            count_statement();
            leave.step();
          }
          exec(l.db.get(), "COMMIT", "fair_release");
          return found;
        } catch (...) {
          try {
            exec(l.db.get(), "ROLLBACK", "fair_release");
          } catch (...) {
          }
          throw;
        }
      }
      busy_timeout_scope scope(
          l.db.get(), std::min(renew_release_busy_ms, time_until(req.deadline, std::chrono::milliseconds(1)).count()));
      statement_run run = lease_statement(l, "lease_release");
      run.bind(1, req.lease.name);
      run.bind(2, req.lease.owner);
      run.bind(3, req.lease.token);
      run.bind(4, std::int64_t{req.min_hold.count()});
      run.bind(5, now_ms());
      count_statement();
      return run.step(true);
    };
    bool released = false;
    try {
      if (on == lane::watchdog) {
        auto lk = lock_lane(watchdog_mu_, req.deadline, kind_name, "lease_release");
        released = run_on(watchdog_);
      } else {
        auto lk = lock_lane(caller_mu_, req.deadline, kind_name, "lease_release");
        released = run_on(caller_);
      }
    } catch (...) {
      waker_->drop(req.lease.owner);  // the lease will expire; its waiters must not wait for this client's exit
      throw;
    }
    waker_->drop(req.lease.owner);
    return released;
  }

  bool force_release(const std::string& name) override {
    std::lock_guard lk(caller_mu_);
    statement_run run = lease_statement(caller_, "lease_force_release");
    run.bind(1, name);
    count_statement();
    return run.step(true);
  }

  std::optional<lock_info> inspect(const std::string& name, steady::time_point deadline) override {
    auto lk = lock_lane(caller_mu_, caller_lane_until(deadline), "sqlite", "lease_inspect");
    statement_run run = lease_statement(caller_, "lease_inspect");
    run.bind(1, name);
    count_statement();
    if (!run.step(true)) return std::nullopt;
    return info_from(run);
  }

  std::optional<lock_info> live_in_range(const std::string& lo, const std::string& hi,
                                         steady::time_point deadline) override {
    auto lk = lock_lane(caller_mu_, caller_lane_until(deadline), "sqlite", "lease_live_in_range");
    statement_run run = lease_statement(caller_, "lease_live_in_range");
    run.bind(1, lo);
    run.bind(2, hi);
    count_statement();
    if (!run.step(true)) return std::nullopt;
    return info_from(run);
  }

  std::vector<lock_info> list_locks() override {
    std::lock_guard lk(caller_mu_);
    statement_run run = lease_statement(caller_, "lease_list");
    count_statement();
    std::vector<lock_info> out;
    while (run.step(true)) out.push_back(info_from(run));
    return out;
  }

  queue_outcome queue_poll(const queue_request& req) override {
    std::unique_lock lk(caller_mu_, std::defer_lock);
    if (!lk.try_lock_until(req.lane_until())) return {};  // the lane stayed busy: nothing sent, poll again
    busy_timeout_scope scope(caller_.db.get(), std::min(acquire_busy_ms,
                                                        time_until(req.deadline, std::chrono::milliseconds(1)).count()));
    queue_outcome out;
    try {
      queue_poll_locked(req, out);
    } catch (const lock_not_available&) {
      // Another connection holds the write lock: the ticket was not renewed this time (seq 0: the
      // waiter polls again soon).
      return {};
    }
    return out;
  }

  void queue_poll_locked(const queue_request& req, queue_outcome& out) {
    if (req.seq == 0) {
      statement_run prune = lease_statement(caller_, "queue_prune");
      prune.bind(1, req.name);
      count_statement();
      prune.step();
    }
    if (!req.refresh && req.seq != 0) {
      // A read only: the engine renewed the ticket less than a quarter of its TTL ago, so it is there.
      out.seq = req.seq;
    } else {
      statement_run enter = lease_statement(caller_, "queue_enter");
      enter.bind(1, req.name);
      enter.bind(2, req.holder);
      enter.bind(3, req.owner);
      enter.bind(4, std::int64_t{req.ttl.count()});
      count_statement();
      if (!enter.step(true)) return;
      out.seq = enter.int_at(0);
    }
    statement_run state = lease_statement(caller_, "queue_state");
    state.bind(1, req.name);
    state.bind(2, out.seq);
    state.bind(3, req.owner);
    count_statement();
    if (state.step(true)) {
      out.ahead = state.int_at(0);
      out.mine = state.int_at(1) != 0;
      if (out.mine && state.text_at(2)) {
        out.token = state.int_at(2);
        out.time_left = std::chrono::milliseconds(std::max<std::int64_t>(0, state.int_at(3)));
        // Held from this read on, as after an acquire: the byte lock tells waiters of other
        // processes if this client dies (idempotent per owner; the release drops it).
        waker_->hold(req.name, req.owner);
      }
    }
  }

  bool handed_lease_from_poll() const noexcept override { return true; }

  void queue_leave(const std::string& owner, steady::time_point deadline) override {
    auto lk = lock_lane(caller_mu_, deadline, kind_name, "queue_leave");
    busy_timeout_scope scope(caller_.db.get(), std::min(renew_release_busy_ms,
                                                        time_until(deadline, std::chrono::milliseconds(1)).count()));
    statement_run run = lease_statement(caller_, "queue_leave");
    run.bind(1, owner);
    count_statement();
    run.step();
  }

  std::vector<queue_waiter> list_queue() override {
    std::lock_guard lk(caller_mu_);
    statement_run run = lease_statement(caller_, "queue_list");
    count_statement();
    std::vector<queue_waiter> out;
    while (run.step(true)) {
      out.push_back({run.text_at(0).value_or(""), run.text_at(1).value_or(""), run.int_at(2),
                     std::chrono::milliseconds(run.int_at(3)), std::chrono::milliseconds(run.int_at(4))});
    }
    return out;
  }

  std::optional<int> semaphore_permits(const std::string& name, int permits, steady::time_point deadline) override {
    std::unique_lock lk(caller_mu_, std::defer_lock);
    if (!lk.try_lock_until(caller_lane_until(deadline))) return std::nullopt;  // busy: nothing sent
    // Read first: a stored count (every use but the first) needs no write, and so no wait for the
    // database's write lock (a WAL reader is never blocked). A try beside another connection's
    // write transaction stored it again on every call, under the default busy timeout, and came
    // back after 5 s with "database is locked".
    auto stored = [&]() -> int {
      statement_run run = lease_statement(caller_, "semaphore_permits");
      run.bind(1, name);
      count_statement();
      if (!run.step(true)) return 0;
      return static_cast<int>(run.int_at(0));
    };
    if (const int known = stored(); known != 0 || read_only()) return known;
    // The first use stores it: a write, which waits for another connection's write transaction
    // no longer than the acquire's deadline (in steps of acquire_busy_ms, like an acquire).
    try {
      busy_timeout_scope scope(caller_.db.get(),
                               std::min(acquire_busy_ms, time_until(deadline, std::chrono::milliseconds(1)).count()));
      statement_run reg = lease_statement(caller_, "semaphore_register");
      reg.bind(1, name);
      reg.bind(2, std::int64_t{permits});
      count_statement();
      reg.step();
    } catch (const lock_not_available&) {
      return std::nullopt;
    }
    return stored();
  }

  std::unique_ptr<session> begin(const transaction_options& options) override {
    if (read_only()) throw invalid_argument("sqlite: transactions need a client that is not read-only");
    auto pooled = idle_.take([](db_handle&) { return true; });
    sqlite3* db = pooled ? pooled->release() : open_db(open_path_, uri_, false).release();
    auto give_back = [this](sqlite3* d, bool healthy) {
      db_handle h(d);  // closed unless kept
      if (healthy && sqlite3_get_autocommit(d)) idle_.give_back(std::move(h));
    };
    return make_session(db, give_back, options, config_.options);
  }

  void set_wake_sink(wake_sink* sink) override { waker_->set_sink(sink); }
  bool watch(const std::string& name, steady::time_point) override { return waker_->watch(name); }
  void unwatch(const std::string& name) override { waker_->unwatch(name); }

 private:
  bool read_only() const noexcept { return config_.options.read_only; }

  // WAL lets readers run beside the one writer: a reader's open transaction never holds up the
  // commit of an acquire or a renewal. It is a property of the file, kept once set. The switch
  // needs a moment with no other transaction on the file (rollback-journal mode: another
  // connection's open transaction, or its locking_mode=EXCLUSIVE); refused, it is tried again,
  // without waiting, before each acquire until it takes. Meanwhile sqllock works in
  // rollback-journal mode (the same statements, busy bounds and durability; only readers hold up
  // writers). Called with the caller lane's mutex held (or from the constructor).
  void switch_to_wal_locked(std::int64_t busy_ms) {
    if (!wal_pending_) return;
    busy_timeout_scope scope(caller_.db.get(), busy_ms);
    sqlite3_stmt* raw = nullptr;
    std::string mode;
    if (sqlite3_prepare_v2(caller_.db.get(), "PRAGMA journal_mode=WAL", -1, &raw, nullptr) == SQLITE_OK &&
        sqlite3_step(raw) == SQLITE_ROW) {
      if (const auto* text = sqlite3_column_text(raw, 0)) mode = reinterpret_cast<const char*>(text);
    }
    sqlite3_finalize(raw);
    if (mode == "wal") {
      wal_pending_ = false;
    } else if (!wal_reported_) {
      wal_reported_ = true;
      log_message(config_.options, log_level::warning,
                  "sqlite: '" + open_path_ + "' stays in " + (mode.empty() ? std::string("its") : "'" + mode + "'") +
                      " journal mode for now (another connection holds it in a transaction or in exclusive "
                      "locking mode): WAL is tried again before each acquire; until then readers hold up writers");
    }
  }

  std::string sql(const char* name) const {
    return render_sql(embedded_sql(sqllock::dialect::sqlite, name), table_, sqllock::dialect::sqlite);
  }

  // A cached prepared lease statement, ready to bind. Called with the lane's mutex held.
  /// A reader-writer row: advance the name's fence and take its value, in one write transaction
  /// (committed only when the row was acquired, so a refused attempt writes nothing).
  acquire_outcome acquire_fenced(const acquire_request& req, std::int64_t busy) {
    acquire_outcome out;
    sqlite3* db = caller_.db.get();
    if (begin_immediate(db, busy) != SQLITE_OK) return out;  // write-locked by another connection: not now
    try {
      std::int64_t token = 0;
      {
        statement_run run = lease_statement(caller_, "fence_advance");
        run.bind(1, req.fence);
        run.bind(2, req.fence_lo);
        run.bind(3, req.fence_hi);
        count_statement();
        if (!run.step(true)) throw database_error("sqlite fence_advance: no row returned", std::string(kind_name), "", "fence_advance");
        token = run.int_at(0);
      }
      {
        statement_run run = lease_statement(caller_, "lease_acquire_fenced");
        run.bind(1, req.name);
        run.bind(2, req.holder);
        run.bind(3, req.owner);
        run.bind(4, std::int64_t{req.ttl.count()});
        run.bind(5, token);
        count_statement();
        if (run.step(true)) {
          out.acquired = true;
          out.token = run.int_at(0);
        }
      }
      exec(db, out.acquired ? "COMMIT" : "ROLLBACK", "lease_acquire");
    } catch (...) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    return out;
  }

  statement_run lease_statement(lane_connection& l, const char* name) {
    auto it = l.statements.find(name);
    if (it == l.statements.end()) {
      it = l.statements.emplace(name, prepare(l.db.get(), sql(name), name, true, true)).first;
    }
    return statement_run(l.db.get(), it->second.get(), name);
  }

  int schema_version_locked() {
    sqlite3* db = caller_.db.get();
    // Stepped, not only prepared: a table dropped by another connection is seen only once the
    // statement reads the schema afresh.
    for (const char* probe : {"lock_table_probe", "schema_version"}) {
      sqlite3_stmt* raw = nullptr;
      const std::string text = sql(probe);
      int rc = sqlite3_prepare_v2(db, text.c_str(), -1, &raw, nullptr);
      stmt_handle s(raw);
      if (rc == SQLITE_OK) {
        rc = sqlite3_step(raw);
        if (rc == SQLITE_ROW && std::string_view(probe) == "schema_version") return sqlite3_column_int(raw, 0);
        if (rc == SQLITE_ROW || rc == SQLITE_DONE) continue;
      }
      if (std::string(sqlite3_errmsg(db)).find("no such table") != std::string::npos) return 0;
      throw_error(db, rc, probe);
    }
    return 0;
  }

  static lock_info info_from(const statement_run& run) {
    lock_info i;
    i.name = run.text_at(0).value_or("");
    i.holder = run.text_at(1).value_or("");
    i.fencing_token = run.int_at(2);
    i.hold_count = run.int_at(3);
    i.time_left = std::chrono::milliseconds(run.int_at(4));
    i.owner = run.text_at(5).value_or("");
    i.acquired_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(run.int_at(6)));
    i.expires_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(run.int_at(7)));
    return i;
  }

  backend_config config_;
  std::string table_;
  std::string open_path_;
  bool uri_ = false;
  bool wal_pending_ = false;   ///< the file is not known to be in WAL mode yet (switch_to_wal_locked)
  bool wal_reported_ = false;  ///< the warning that it is not was logged

  fifo_mutex caller_mu_;  // callers take turns on their connection in arrival order
  lane_connection caller_;
  fifo_mutex watchdog_mu_;  // the watchdog thread, explicit renew() and re-sent releases
  lane_connection watchdog_;

  idle_pool<db_handle> idle_;  // transactions' connections

  std::unique_ptr<waker> waker_;
};

}  // namespace
}  // namespace sqllock::detail::sqlite

namespace sqllock::detail {

std::unique_ptr<backend> make_sqlite_backend(const backend_config& config) {
  return std::make_unique<sqlite::sqlite_backend>(config);
}

}  // namespace sqllock::detail
