// The PostgreSQL backend: lease statements on two lanes (callers, watchdog), LISTEN wake-ups, sessions.
#include <algorithm>
#include <cerrno>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/fifo_mutex.hpp"
#include "core/rw_name.hpp"
#include "core/url.hpp"
#include "postgresql/postgresql_connection.hpp"
#include "postgresql/postgresql_waker.hpp"

namespace sqllock::detail {

namespace pg {
namespace {

/// One embedded statement, rendered for the configured table.
struct statement {
  std::string name;      ///< the sql/postgresql/<name>.sql file (for messages)
  std::string prepared;  ///< the server-side prepared statement's name, unique per lock table
  std::string sql;
};

statement load(std::string_view name, const std::string& table) {
  char tag[24];
  std::snprintf(tag, sizeof tag, "%08x", static_cast<unsigned>(fnv1a(table) & 0xffffffffu));
  return {std::string(name), "sqllock_" + std::string(tag) + "_" + std::string(name),
          render_sql(embedded_sql(sqllock::dialect::postgresql, name), table, sqllock::dialect::postgresql)};
}

/// The URL's connect_timeout (whole seconds, as libpq reads it), else 10 s; at least 2 s like libpq.
std::chrono::milliseconds connect_timeout_of(const database_url& url) {
  if (auto it = url.params.find("connect_timeout"); it != url.params.end()) {
    try {
      const long long seconds = std::stoll(it->second);
      if (seconds > 0) return std::chrono::seconds(std::max(2LL, seconds));
    } catch (const std::exception&) {
    }
  }
  return std::chrono::milliseconds(10000);
}

/// The server a connection landed on. A promoted standby keeps the system identifier and runs on a
/// new timeline; another cluster behind the same address has another system identifier.
struct server_identity {
  std::string system_id;  ///< "" when pg_control_system() is not readable by this role
  std::string timeline;   ///< "" on a standby (read-only clients)
  bool operator==(const server_identity&) const = default;
  std::string text() const {
    return "system identifier " + (system_id.empty() ? std::string("?") : system_id) + ", timeline " +
           (timeline.empty() ? std::string("?") : timeline);
  }
};

/// Called once per new lease connection; returns the server generation it belongs to.
using identify_fn = std::function<std::uint64_t(PGconn*, steady::time_point)>;

/// One connection for lease statements, with its prepared statements. Not thread-safe: the backend
/// serializes each lane (callers in FIFO order, the watchdog on its own).
class lane_connection {
 public:
  lane_connection(const conn_target& target, const client_options& options, identify_fn identify)
      : target_(target), options_(options), identify_(std::move(identify)) {}

  /// The server generation (see postgresql_backend::identify) of the current connection.
  std::uint64_t generation() const noexcept { return generation_; }

  /// Run `s` with text parameters; no answer by `deadline` closes the connection and throws
  /// connection_lost. A serialization failure or deadlock of the one-statement transaction (a
  /// server whose default isolation is SERIALIZABLE, reached through a pooler) means nothing was
  /// applied: it is tried again until the deadline.
  result_ptr run(const statement& s, const text_params& params, steady::time_point deadline) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    const int n = static_cast<int>(values.size());
    bool reprepared = false;
    for (int attempt = 0;; ++attempt) {
      PGconn* c = conn(deadline);
      try {
        if (options_.prepared_statements) {
          if (!prepared_.contains(s.name)) {
            // Parsed once per connection.
            if (!PQsendPrepare(c, s.prepared.c_str(), s.sql.c_str(), n, nullptr)) throw_error(c, nullptr, s.name);
            auto p = await_result(c, s.name, deadline);
            if (PQresultStatus(p.get()) != PGRES_COMMAND_OK) throw_error(c, p.get(), s.name);
            prepared_.insert(s.name);
          }
          if (!PQsendQueryPrepared(c, s.prepared.c_str(), n, values.data(), nullptr, nullptr, 0))
            throw_error(c, nullptr, s.name);
        } else {
          if (!PQsendQueryParams(c, s.sql.c_str(), n, nullptr, values.data(), nullptr, nullptr, 0))
            throw_error(c, nullptr, s.name);
        }
        auto r = await_result(c, s.name, deadline);
        const auto st = PQresultStatus(r.get());
        if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
        const std::string state = sqlstate(r.get());
        // Someone ran DISCARD ALL / DEALLOCATE on our session: prepare again once.
        if (!reprepared && options_.prepared_statements && state == "26000") {
          reprepared = true;
          prepared_.clear();
          continue;
        }
        if ((state == "40001" || state == "40P01") && steady::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(std::min(attempt, 10)));
          continue;
        }
        throw_error(c, r.get(), s.name);
      } catch (const connection_lost&) {
        reset();
        throw;
      }
    }
  }

  /// The connection, opened (bounded by `deadline`) if there is none or the server ended it.
  PGconn* conn(steady::time_point deadline) {
    // An idle connection the server has ended (pg_terminate_backend, restart) already holds the
    // FATAL message and EOF: reading them without blocking marks it bad, and we reconnect before
    // sending anything, so nothing is ever run twice.
    if (conn_ && PQstatus(conn_.get()) == CONNECTION_OK) {
      if (idle_connection_alive(conn_.get())) return conn_.get();
      log_message(options_, log_level::info, "postgresql: a lease connection was closed by the server; reconnecting");
    }
    const bool had = conn_ != nullptr;
    reset();
    conn_ = connect(target_, &options_, time_until(deadline, std::chrono::milliseconds(1)));
    try {
      generation_ = identify_(conn_.get(), deadline);
    } catch (...) {
      reset();
      throw;
    }
    if (had) log_message(options_, log_level::info, "postgresql: lease connection re-established");
    return conn_.get();
  }

  void reset() noexcept {
    conn_.reset();
    prepared_.clear();
  }

 private:
  const conn_target& target_;
  const client_options& options_;
  identify_fn identify_;
  conn_ptr conn_;
  std::uint64_t generation_ = 0;
  std::unordered_set<std::string> prepared_;
};

class postgresql_backend final : public backend {
 public:
  explicit postgresql_backend(const backend_config& config)
      : options_(config.options),
        target_{driver_uri(config.url), config.url.redacted(), config.url, connect_timeout_of(config.url), true},
        table_(config.options.table),
        acquire_(load("lease_acquire", table_)),
        acquire_fenced_(load("lease_acquire_fenced", table_)),
        renew_(load("lease_renew", table_)),
        release_(load("lease_release", table_)),
        force_release_(load("lease_force_release", table_)),
        inspect_(load("lease_inspect", table_)),
        writer_check_(load("rw_writer_check", table_)),
        writer_check_nowait_(load("rw_writer_check_nowait", table_)),
        readers_check_(load("rw_readers_check", table_)),
        readers_check_nowait_(load("rw_readers_check_nowait", table_)),
        list_(load("lease_list", table_)),
        live_range_(load("lease_live_in_range", table_)),
        semaphore_register_(load("semaphore_register", table_)),
        semaphore_permits_(load("semaphore_permits", table_)),
        queue_poll_(load("queue_poll", table_)),
        queue_state_(load("queue_state", table_)),
        queue_leave_(load("queue_leave", table_)),
        queue_list_(load("queue_list", table_)),
        fair_release_(load("fair_release", table_)),
        schema_tables_(load("schema_tables", table_)),
        schema_version_(load("schema_version", table_)),
        migrate_lock_(load("migrate_lock", table_)),
        migrate_record_(load("migrate_record", table_)),
        caller_(target_, options_, [this](PGconn* c, steady::time_point d) { return identify(c, d); }),
        watchdog_(target_, options_, [this](PGconn* c, steady::time_point d) { return identify(c, d); }),
        pool_(std::make_shared<connection_pool>(
            conn_target{driver_uri(config.url), config.url.redacted(), config.url, connect_timeout_of(config.url)},
            options_)) {
    validate_conninfo(config.url);
    std::lock_guard lock(caller_mutex_);
    const auto deadline = steady::now() + target_.connect_timeout;
    try {
      check_server(caller_.conn(deadline), deadline);
    } catch (const connection_lost&) {
      caller_.reset();
      throw;
    }
    if (options_.notifications) waker_ = std::make_unique<waker>(target_, options_);
  }

  ~postgresql_backend() override { waker_.reset(); }

  sqllock::dialect dialect() const noexcept override { return sqllock::dialect::postgresql; }
  bool renewals_pass_guards() const noexcept override { return true; }

  int schema_version() override {
    std::lock_guard lock(caller_mutex_);
    const auto deadline = steady::now() + io_timeout;
    try {
      return schema_version_locked(caller_.conn(deadline), deadline);
    } catch (const connection_lost&) {
      caller_.reset();
      throw;
    }
  }

  int migrate() override {
    std::lock_guard lock(caller_mutex_);
    // Migrations may wait for another migrator: a generous bound.
    const auto deadline = steady::now() + std::chrono::minutes(5);
    PGconn* c = caller_.conn(deadline);
    try {
      exec_simple_until(c, "BEGIN", "migrate", deadline);
      // Key per lock table, so that migrations of different tables do not wait on each other.
      const auto key = static_cast<std::int64_t>(fnv1a("sqllock migrate " + table_));
      exec_params_until(c, migrate_lock_.sql, {std::to_string(key)}, migrate_lock_.name, deadline);
      // A dropped lock table (its version rows still there) is created again from the first step.
      int current = schema_version_locked(c, deadline);
      for (const auto& m : embedded_migrations(sqllock::dialect::postgresql)) {
        if (m.version <= current) continue;
        exec_simple_until(c, render_sql(m.text, table_, sqllock::dialect::postgresql),
                          "migration " + std::string(m.file), deadline);
        exec_params_until(c, migrate_record_.sql, {std::to_string(m.version)}, migrate_record_.name, deadline);
        current = m.version;
      }
      exec_simple_until(c, "COMMIT", "migrate", deadline);
      count_statement();
      caller_.reset();  // statements prepared before the schema changed are stale
      return current;
    } catch (...) {
      caller_.reset();  // whatever state the transaction is in, the connection goes
      throw;
    }
  }

  acquire_outcome acquire(const acquire_request& req) override {
    std::unique_lock lock(caller_mutex_, std::defer_lock);
    if (!lock.try_lock_until(req.lane_until())) return {};  // the connection stayed busy: not acquired now
    const auto started = steady::now();
    count_statement();
    auto r = req.fence.empty()
                 ? caller_.run(acquire_, {req.name, req.holder, req.owner, std::to_string(req.ttl.count())}, req.deadline)
                 : caller_.run(acquire_fenced_,
                               {req.name, req.holder, req.owner, std::to_string(req.ttl.count()), req.fence,
                                req.fence_lo, req.fence_hi},
                               req.deadline);
    acquire_outcome out;
    out.started = started;
    if (PQntuples(r.get()) == 0) return out;  // the row changed between the snapshot and the conflict check
    if (field_text(r.get(), 0, 0) == "t") {
      out.acquired = true;
      out.token = field_int(r.get(), 0, 1);
      std::lock_guard g(identity_mutex_);
      granted_[req.owner] = caller_.generation();
    } else {
      out.holder = field_text(r.get(), 0, 2);
      out.time_left = std::chrono::milliseconds(std::max<std::int64_t>(0, field_int(r.get(), 0, 3)));
    }
    return out;
  }

  std::vector<std::size_t> renew(std::span<const renew_item> items, steady::time_point deadline) override {
    if (items.empty()) return {};
    std::vector<std::optional<std::string>> names, owners, tokens, ttls;
    for (const auto& it : items) {
      names.push_back(it.lease.name);
      owners.push_back(it.lease.owner);
      tokens.push_back(std::to_string(it.lease.token));
      ttls.push_back(std::to_string(it.ttl.count()));
    }
    std::lock_guard lock(watchdog_mutex_);
    count_statement();
    auto r = watchdog_.run(
        renew_, {array_literal(names), array_literal(owners), array_literal(tokens), array_literal(ttls)}, deadline);
    std::vector<std::size_t> matched;
    std::lock_guard g(identity_mutex_);
    // The newest generation any lease connection has seen, not the watchdog connection's own: when
    // the callers' connection already landed on a promoted server, a watchdog connection still on
    // the old one must not keep renewing what the old one granted.
    const auto now_generation = generation_;
    for (int row = 0; row < PQntuples(r.get()); ++row) {
      const auto slot = field_int(r.get(), row, 0) - 1;
      if (slot < 0 || static_cast<std::size_t>(slot) >= items.size()) continue;
      // Granted by another server than the one renewing it (a failover, or another cluster behind
      // the same address): not known to be held, whatever this server's row says.
      const auto it = granted_.find(items[static_cast<std::size_t>(slot)].lease.owner);
      if (it != granted_.end() && it->second != now_generation) continue;
      matched.push_back(static_cast<std::size_t>(slot));
    }
    std::sort(matched.begin(), matched.end());
    // Leases that failed are lost for good: forget them.
    for (std::size_t i = 0, m = 0; i < items.size(); ++i) {
      if (m < matched.size() && matched[m] == i) {
        ++m;
        continue;
      }
      granted_.erase(items[i].lease.owner);
    }
    return matched;
  }

  release_outcome release(const release_request& req, lane on) override {
    if (req.hand_over) return fair_release(req, on);
    // $6: the guard check (lease_release.sql) only for a reader-writer's reader or writer row.
    const auto rw = rw_row_of(req.lease.name);
    const bool check_guard = rw && rw->second != rw_row::fence;
    text_params params{req.lease.name, req.lease.owner, std::to_string(req.lease.token),
                       std::to_string(req.min_hold.count()), std::nullopt, std::string(check_guard ? "true" : "false")};
    // The channel to notify when the row is freed; NULL sends no notification.
    if (options_.notifications) params[4] = channel_for(table_, req.lease.name);
    {
      std::lock_guard g(identity_mutex_);
      granted_.erase(req.lease.owner);
    }
    auto run = [&](lane_connection& l) {
      count_statement();
      auto r = l.run(release_, params, req.deadline);
      if (PQntuples(r.get()) > 0 && field_text(r.get(), 0, 2) == "t") {
        throw release_guarded("release of '" + req.lease.name +
                                  "': its row is locked by an open transaction guarding the lease; sent again when it ends",
                              std::string(backend_name), "", "lease_release");
      }
      return PQntuples(r.get()) > 0;
    };
    if (on == lane::watchdog) {
      auto lock = lock_lane(watchdog_mutex_, req.deadline, backend_name, "lease_release");
      return run(watchdog_);
    }
    auto lock = lock_lane(caller_mutex_, req.deadline, backend_name, "lease_release");
    return run(caller_);
  }

  // A fair holder's release: hands the row to the next live ticket or frees it (fair_release.sql).
  release_outcome fair_release(const release_request& req, lane on) {
    text_params params{req.lease.name, req.lease.owner, std::to_string(req.lease.token), std::nullopt};
    if (options_.notifications) params[3] = channel_for(table_, req.lease.name);
    {
      std::lock_guard g(identity_mutex_);
      granted_.erase(req.lease.owner);
    }
    auto run = [&](lane_connection& l) {
      count_statement();
      auto r = l.run(fair_release_, params, req.deadline);
      return PQntuples(r.get()) > 0 && field_text(r.get(), 0, 0) == "t";
    };
    if (on == lane::watchdog) {
      auto lock = lock_lane(watchdog_mutex_, req.deadline, backend_name, "fair_release");
      return run(watchdog_);
    }
    auto lock = lock_lane(caller_mutex_, req.deadline, backend_name, "fair_release");
    return run(caller_);
  }

  queue_outcome queue_poll(const queue_request& req) override {
    std::unique_lock lock(caller_mutex_, std::defer_lock);
    if (!lock.try_lock_until(req.lane_until())) return {};  // the lane stayed busy: nothing sent, poll again
    count_statement();
    auto r = req.refresh ? caller_.run(queue_poll_, {req.name, req.holder, req.owner, std::to_string(req.ttl.count())},
                                       req.deadline)
                         : caller_.run(queue_state_, {req.owner}, req.deadline);
    queue_outcome out;
    if (PQntuples(r.get()) == 0) return out;
    out.seq = field_int(r.get(), 0, 0);
    out.ahead = field_int(r.get(), 0, 1);
    out.mine = field_text(r.get(), 0, 2) == "t";
    if (!req.refresh && out.mine && PQnfields(r.get()) >= 5 && !PQgetisnull(r.get(), 0, 3)) {
      out.token = field_int(r.get(), 0, 3);
      out.time_left = std::chrono::milliseconds(std::max<std::int64_t>(0, field_int(r.get(), 0, 4)));
    }
    return out;
  }

  bool handed_lease_from_poll() const noexcept override { return true; }

  void queue_leave(const std::string& owner, steady::time_point deadline) override {
    auto lock = lock_lane(caller_mutex_, deadline, backend_name, "queue_leave");
    count_statement();
    caller_.run(queue_leave_, {owner}, deadline);
  }

  std::vector<queue_waiter> list_queue() override {
    std::lock_guard lock(caller_mutex_);
    count_statement();
    auto r = caller_.run(queue_list_, {}, steady::now() + io_timeout);
    std::vector<queue_waiter> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      out.push_back({field_text(r.get(), i, 0), field_text(r.get(), i, 1), field_int(r.get(), i, 2),
                     std::chrono::milliseconds(field_int(r.get(), i, 3)),
                     std::chrono::milliseconds(field_int(r.get(), i, 4))});
    }
    return out;
  }

  bool force_release(const std::string& name) override {
    std::lock_guard lock(caller_mutex_);
    // The channel is NULL with notifications off: the statement then sends none.
    text_params params{name, std::nullopt};
    if (options_.notifications) params[1] = channel_for(table_, name);
    count_statement();
    auto r = caller_.run(force_release_, params, steady::now() + io_timeout);
    return PQntuples(r.get()) > 0;
  }

  std::optional<lock_info> inspect(const std::string& name, steady::time_point deadline) override {
    return first_lock_row(inspect_, {name}, deadline);
  }

  bool guards_hold_off_readers() const noexcept override { return true; }

  std::optional<lock_info> inspect_writer_after_guards(const std::string& name, lock_wait mode,
                                                       steady::time_point deadline) override {
    if (mode == lock_wait::wait) return first_lock_row(writer_check_, {name}, deadline);
    // SKIP LOCKED: a row lock met is an answer (row_locked false), not an error in the server's log.
    auto lock = lock_lane(caller_mutex_, caller_lane_until(deadline), backend_name, "rw_writer_check_nowait");
    count_statement();
    auto r = caller_.run(writer_check_nowait_, {name}, deadline);
    if (PQntuples(r.get()) == 0) return std::nullopt;
    if (field_text(r.get(), 0, 8) != "t") throw_row_locked("rw_writer_check_nowait");
    return info(r.get(), 0);
  }

  std::vector<lock_info> list_locks() override {
    std::lock_guard lock(caller_mutex_);
    count_statement();
    auto r = caller_.run(list_, {}, steady::now() + io_timeout);
    std::vector<lock_info> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(info(r.get(), i));
    return out;
  }

  std::optional<lock_info> live_in_range_after_guards(const std::string& lo, const std::string& hi,
                                                      lock_wait mode, steady::time_point deadline) override {
    auto lock = lock_lane(caller_mutex_, caller_lane_until(deadline), backend_name, "rw_readers_check");
    count_statement();
    auto r = caller_.run(mode == lock_wait::nowait ? readers_check_nowait_ : readers_check_, {lo, hi}, deadline);
    std::optional<lock_info> last;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      // SKIP LOCKED (no ERROR in the server's log): a row it could not lock is reported as NOWAIT would.
      if (mode == lock_wait::nowait && field_text(r.get(), i, 8) != "t") throw_row_locked("rw_readers_check_nowait");
      auto row = info(r.get(), i);
      if (row.time_left.count() > 0 && (!last || row.time_left > last->time_left)) last = std::move(row);
    }
    return last;
  }

  std::optional<lock_info> live_in_range(const std::string& lo, const std::string& hi,
                                         steady::time_point deadline) override {
    return first_lock_row(live_range_, {lo, hi}, deadline);
  }

  std::optional<int> semaphore_permits(const std::string& name, int permits, steady::time_point deadline) override {
    std::unique_lock lock(caller_mutex_, std::defer_lock);
    if (!lock.try_lock_until(caller_lane_until(deadline))) return std::nullopt;  // busy: nothing sent
    if (!options_.read_only) {
      count_statement();
      caller_.run(semaphore_register_, {name, std::to_string(permits)}, deadline);
    }
    count_statement();
    auto r = caller_.run(semaphore_permits_, {name}, deadline);
    if (PQntuples(r.get()) == 0) return 0;
    return static_cast<int>(field_int(r.get(), 0, 0));
  }

  std::unique_ptr<session> begin(const transaction_options& options) override {
    if (options_.read_only) throw invalid_argument("postgresql: transactions need a client that is not read-only");
    std::string sql = "BEGIN";
    if (options.lock_timeout) {
      sql += "; SET LOCAL lock_timeout = '" + timeout_text(*options.lock_timeout) + "'";
    } else {
      // The server's default, not a session SET an earlier transaction ran on this pooled
      // connection (DEFAULT ignores the session's SETs); same round trip.
      sql += "; SET LOCAL lock_timeout = DEFAULT";
    }
    for (int attempt = 0;; ++attempt) {
      auto [conn, pooled] = pool_->take();
      try {
        exec_simple(conn.get(), sql, "begin");
        return make_session(pool_, std::move(conn), options_);
      } catch (const connection_lost&) {
        // An idle pooled connection may have been closed by the server meanwhile: one fresh try.
        if (!pooled || attempt > 0) throw;
      }
    }
  }

  void set_wake_sink(wake_sink* sink) override {
    if (waker_) waker_->set_sink(sink);
  }
  bool watch(const std::string& name, steady::time_point until) override {
    return waker_ && waker_->watch(name, channel_for(table_, name), until);
  }
  void unwatch(const std::string& name) override {
    if (waker_) waker_->unwatch(name, channel_for(table_, name));
  }

 private:
  /// What a NOWAIT read meeting a row lock reports; the SKIP LOCKED checks answer it instead.
  [[noreturn]] static void throw_row_locked(const char* statement) {
    throw lock_not_available(
        "postgresql: a reader-writer row is locked (a guarded transaction, a renewal or another check)",
        std::string(backend_name), "55P03", statement);
  }

  static lock_info info(const PGresult* r, int row) {
    lock_info li;
    li.name = field_text(r, row, 0);
    li.holder = field_text(r, row, 1);
    li.fencing_token = field_int(r, row, 2);
    li.hold_count = field_int(r, row, 3);
    li.time_left = std::chrono::milliseconds(field_int(r, row, 4));
    li.owner = field_text(r, row, 5);
    li.acquired_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(field_int(r, row, 6)));
    li.expires_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(field_int(r, row, 7)));
    return li;
  }

  /// The first lock row that `s` answers (inspect, the reader's writer checks, live_in_range), one
  /// statement on the callers' lane.
  std::optional<lock_info> first_lock_row(const statement& s, const text_params& params, steady::time_point deadline) {
    auto lock = lock_lane(caller_mutex_, caller_lane_until(deadline), backend_name, "lease_inspect");
    count_statement();
    auto r = caller_.run(s, params, deadline);
    if (PQntuples(r.get()) == 0) return std::nullopt;
    return info(r.get(), 0);
  }

  /// Refuse a server that makes nothing durable (fsync = off) unless the user accepts the risk: an
  /// acquisition lost in a crash would hand its fencing token out again.
  void check_server(PGconn* c, steady::time_point deadline) {
    auto r = exec_params_until(c, "SELECT current_setting('fsync')", {}, "server_settings", deadline);
    if (field_text(r.get(), 0, 0) == "off" && !options_.allow_unsafe_durability) {
      throw database_error(
          "postgresql: the server runs with fsync = off, so an acknowledged acquisition can be lost in a crash and "
          "its fencing token handed out again; turn fsync on, or accept the risk with "
          "client_options::allow_unsafe_durability (URL sqllock_allow_unsafe_durability=on)",
          std::string(backend_name), "", "server_settings");
    }
  }

  /// Identify the server a new lease connection landed on. The first one seen is generation 0;
  /// each change (a failover, or another server behind the address) starts a new generation, and
  /// leases granted in an earlier one are reported lost at their next renewal.
  std::uint64_t identify(PGconn* c, steady::time_point deadline) {
    server_identity id;
    // One round trip. pg_control_system() is readable by every role on some versions, only by
    // superusers (or by grant) on others.
    auto r = exec_params_until(c,
                               "SELECT CASE WHEN pg_is_in_recovery() THEN NULL ELSE "
                               "('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END, "
                               "CASE WHEN has_function_privilege('pg_control_system()', 'EXECUTE') "
                               "THEN (SELECT system_identifier::text FROM pg_control_system()) END",
                               {}, "server_identity", deadline);
    id.timeline = field_text(r.get(), 0, 0);
    id.system_id = field_text(r.get(), 0, 1);
    std::lock_guard g(identity_mutex_);
    if (!identity_) {
      identity_ = id;
      return generation_;
    }
    // A standby's unknown timeline (read-only clients) is no change.
    const bool same_system = id.system_id.empty() || identity_->system_id.empty() || id.system_id == identity_->system_id;
    const bool same_timeline = id.timeline.empty() || identity_->timeline.empty() || id.timeline == identity_->timeline;
    if (!(same_system && same_timeline)) {
      log_message(options_, log_level::warning,
                  "postgresql: the lease connection reached another server than before (" + identity_->text() +
                      " -> " + id.text() + "): a failover; leases granted before are reported lost");
      ++generation_;
    }
    if (!id.system_id.empty()) identity_->system_id = id.system_id;
    if (!id.timeline.empty()) identity_->timeline = id.timeline;
    return generation_;
  }

  int schema_version_locked(PGconn* c, steady::time_point deadline) {
    auto t = exec_params_until(c, schema_tables_.sql, {}, schema_tables_.name, deadline);
    if (field_text(t.get(), 0, 0) != "t" || field_text(t.get(), 0, 1) != "t") return 0;
    auto v = exec_params_until(c, schema_version_.sql, {}, schema_version_.name, deadline);
    return static_cast<int>(field_int(v.get(), 0, 0));
  }

  client_options options_;
  conn_target target_;
  std::string table_;
  statement acquire_, acquire_fenced_, renew_, release_, force_release_, inspect_, writer_check_, writer_check_nowait_, readers_check_, readers_check_nowait_, list_, live_range_, semaphore_register_, semaphore_permits_,
      queue_poll_, queue_state_, queue_leave_, queue_list_, fair_release_,
      schema_tables_, schema_version_, migrate_lock_, migrate_record_;

  fifo_mutex caller_mutex_;  // callers take turns on their connection in arrival order
  lane_connection caller_;
  fifo_mutex watchdog_mutex_;  // the watchdog thread, explicit renew() and re-sent releases
  lane_connection watchdog_;

  std::shared_ptr<connection_pool> pool_;
  std::unique_ptr<waker> waker_;

  std::mutex identity_mutex_;  // identity_, generation_, granted_
  std::optional<server_identity> identity_;
  std::uint64_t generation_ = 0;
  std::unordered_map<std::string, std::uint64_t> granted_;  // owner of a granted lease -> generation
};

}  // namespace
}  // namespace pg

std::unique_ptr<backend> make_postgresql_backend(const backend_config& config) {
  return std::make_unique<pg::postgresql_backend>(config);
}

}  // namespace sqllock::detail
