// The MySQL/MariaDB backend: lease statements on two lanes (callers, watchdog), migrations, wake-ups.
#include <cppconn/connection.h>
#include <cppconn/exception.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "core/fifo_mutex.hpp"
#include "mysql/mysql_connection.hpp"
#include "mysql/mysql_waker.hpp"
#include "sqllock/error.hpp"
#include "sqllock/migrations.hpp"

namespace sqllock::detail {
namespace mysql {
namespace {

/// Backstop for a statement on a connection whose socket could not be found (deadline_timer then
/// cannot cut it short); whole seconds, as Connector/C++ takes them: the longest lease statement
/// bound (io_timeout).
constexpr int lease_read_timeout_s = 10;
constexpr int migrate_lock_timeout_s = 120;
constexpr int max_deadlock_retries = 5;
/// holder_id is VARBINARY(512) in the lock table.
constexpr std::size_t max_holder_bytes = 512;
/// How long a fair holder waits for its wake-up lock (claim_wake_lock).
constexpr std::chrono::milliseconds fair_wake_lock_wait{50};

std::int64_t to_int(const std::optional<std::string>& v) {
  if (!v) return 0;
  try {
    return std::stoll(*v);
  } catch (...) {
    return 0;
  }
}

bool truthy(const std::optional<std::string>& v) { return v && *v == "1"; }

/// The rendered statements of one lock table.
struct statement_set {
  explicit statement_set(const std::string& table)
      : acquire(statement_text("lease_acquire", table)),
        acquire_plain(statement_text("lease_acquire_no_returning", table)),
        acquire_result(statement_text("lease_acquire_result", table)),
        acquire_fenced(statement_text("lease_acquire_fenced", table)),
        acquire_fenced_plain(statement_text("lease_acquire_fenced_no_returning", table)),
        acquire_no_lock_wait(no_lock_wait + acquire),
        acquire_fenced_no_lock_wait(no_lock_wait + acquire_fenced),
        fence_advance(statement_text("fence_advance", table)),
        fence_advance_plain(statement_text("fence_advance_no_returning", table)),
        fence_read(statement_text("fence_read", table)),
        fence_floor(statement_text("fence_floor", table)),
        fence_lift(statement_text("fence_lift", table)),
        renew(statement_text("lease_renew", table)),
        renew_check(statement_text("lease_renew_check", table)),
        release(statement_text("lease_release", table)),
        release_plain(statement_text("lease_release_no_returning", table)),
        force_release(statement_text("lease_force_release", table)),
        inspect(statement_text("lease_inspect", table)),
        writer_check(statement_text("rw_writer_check", table)),
        writer_check_nowait(statement_text("rw_writer_check_nowait", table)),
        readers_check(statement_text("rw_readers_check", table)),
        readers_check_nowait(statement_text("rw_readers_check_nowait", table)),
        list(statement_text("lease_list", table)),
        live_range(statement_text("lease_live_in_range", table)),
        semaphore_register(statement_text("semaphore_register", table)),
        semaphore_permits(statement_text("semaphore_permits", table)),
        queue_enter(statement_text("queue_enter", table)),
        queue_state(statement_text("queue_state", table)),
        queue_prune(statement_text("queue_prune", table)),
        queue_leave(statement_text("queue_leave", table)),
        queue_list(statement_text("queue_list", table)),
        fair_release(statement_text("fair_release", table)),
        wake_take(statement_text("wake_lock_take", table)),
        wake_take_wait(statement_text("wake_lock_take_wait", table)),
        wake_release(statement_text("wake_lock_release", table)),
        schema_version(statement_text("schema_version", table)),
        schema_record(statement_text("schema_record", table)),
        lock_table_probe(statement_text("lock_table_probe", table)),
        migrate_lock(statement_text("migrate_lock", table)),
        migrate_unlock(statement_text("migrate_unlock", table)),
        time_zone(statement_text("session_time_zone", table)),
        sync_wait(statement_text("session_sync_wait", table)) {}
  /// MariaDB: a single try's upsert does not wait for a row lock (a live holder's guarded
  /// transaction): 1205 at once instead (acquire_request::no_lock_wait).
  static constexpr const char* no_lock_wait = "SET STATEMENT innodb_lock_wait_timeout = 0 FOR ";
  std::string acquire, acquire_plain, acquire_result, acquire_fenced, acquire_fenced_plain, acquire_no_lock_wait,
      acquire_fenced_no_lock_wait, fence_advance,
      fence_advance_plain, fence_read, fence_floor, fence_lift, renew, renew_check, release, release_plain, force_release,
      inspect, writer_check, writer_check_nowait, readers_check, readers_check_nowait, list, live_range, semaphore_register, semaphore_permits, queue_enter, queue_state, queue_prune, queue_leave,
      queue_list, fair_release, wake_take, wake_take_wait, wake_release, schema_version, schema_record, lock_table_probe, migrate_lock,
      migrate_unlock, time_zone, sync_wait;
};

/// MariaDB 10.6+ (JSON_TABLE, SKIP LOCKED, INSERT ... RETURNING) or MySQL 8.0+ (JSON_TABLE).
void require_supported(const server_traits& t) {
  const bool ok = t.mariadb ? (t.major > 10 || (t.major == 10 && t.minor >= 6)) : t.major >= 8;
  if (!ok) {
    throw database_error("mysql: server version " + std::to_string(t.major) + "." + std::to_string(t.minor) +
                             " is too old; sqllock needs MariaDB 10.6+ or MySQL 8.0+",
                         std::string(backend_name), "", "connect");
  }
}

/// Lower-case hex of arbitrary bytes (names and owners travel through JSON as hex).
void append_hex(std::string& out, std::string_view bytes) {
  static const char digits[] = "0123456789abcdef";
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 0xF];
  }
}

lock_info row_to_info(const result_row& r) {
  lock_info info;
  info.name = r[0].value_or("");
  info.holder = r[1].value_or("");
  info.fencing_token = to_int(r[2]);
  info.hold_count = to_int(r[3]);
  info.time_left = r[4] ? floor_ms(to_int(r[4])) : std::chrono::milliseconds(0);
  info.owner = r[5].value_or("");
  info.acquired_at = std::chrono::system_clock::time_point(std::chrono::microseconds(to_int(r[6])));
  info.expires_at = std::chrono::system_clock::time_point(std::chrono::microseconds(to_int(r[7])));
  return info;
}

/// One connection for lease statements. The caller lane also holds the wake-up locks (GET_LOCK)
/// of the leases it acquired: name -> owner id of the acquisition.
struct lane_state {
  std::unique_ptr<connection> conn;
  std::map<std::string, std::string> wake_locks;
};

class mysql_backend final : public backend {
 public:
  explicit mysql_backend(const backend_config& config)
      : options_(config.options),
        params_(make_connect_params(config.url)),
        table_(config.options.table),
        sql_(config.options.table),
        pool_(std::make_shared<connection_pool>(params_)) {
    validate_identifier(table_);
    const auto dot = table_.find('.');
    scope_ = dot == std::string::npos ? config.url.database + '.' + table_ : table_;
    if (options_.notifications) waker_ = std::make_unique<waker>(params_, options_, scope_, table_);
    std::lock_guard lock(caller_mutex_);
    // Unreachable or unsafe: thrown from the factory, as connect() promises.
    open_lane(caller_, steady::now() + std::chrono::seconds(params_.connect_timeout_s));
  }

  ~mysql_backend() override { waker_.reset(); }

  sqllock::dialect dialect() const noexcept override { return sqllock::dialect::mysql; }

  int schema_version() override {
    std::lock_guard lock(caller_mutex_);
    return with_lane(caller_, steady::now() + io_timeout, [&](connection& c) { return read_schema_version(c); });
  }

  int migrate() override {
    if (options_.read_only) throw invalid_argument("mysql: migrate needs a client that is not read-only");
    // A connection of its own: waiting for another process's migration must not stall the lease
    // connections.
    connection c(open_connection(params_, /*found_rows=*/false, 0));
    count_statement();
    result_rows got =
        c.query(sql_.migrate_lock, {scope_, static_cast<std::int64_t>(migrate_lock_timeout_s)}, "migrate_lock");
    if (got.empty() || !got[0][0] || *got[0][0] != "1") {
      throw database_error("mysql migrate_lock: another migrate held the migration lock for " +
                               std::to_string(migrate_lock_timeout_s) + " s",
                           std::string(backend_name), "", "migrate_lock");
    }
    // Closing the connection would release the GET_LOCK too; release it explicitly anyway.
    try {
      // A dropped lock table (its version rows still there) is created again from the first step.
      const int current = read_schema_version(c);
      for (const embedded_migration& m : embedded_migrations(sqllock::dialect::mysql)) {
        if (m.version <= current) continue;
        const std::string name = "migration " + std::string(m.file);
        for (const std::string& stmt :
             split_sql_statements(render_sql(m.text, table_, sqllock::dialect::mysql), sqllock::dialect::mysql)) {
          count_statement();
          c.execute(stmt, {}, name);
        }
        count_statement();
        c.execute(sql_.schema_record, {static_cast<std::int64_t>(m.version), std::string(m.file)}, "schema_record",
                  true);
      }
    } catch (...) {
      unlock_migration(c);
      throw;
    }
    unlock_migration(c);
    return read_schema_version(c);
  }

  acquire_outcome acquire(const acquire_request& req) override {
    if (req.holder.empty() || req.holder.size() > max_holder_bytes) {
      throw invalid_argument("holder id must be 1 to " + std::to_string(max_holder_bytes) +
                             " bytes for the mysql backend");
    }
    const std::int64_t us = static_cast<std::int64_t>(req.ttl.count()) * 1000;
    std::unique_lock lock(caller_mutex_, std::defer_lock);
    if (!lock.try_lock_until(req.lane_until())) return {};  // the connection stayed busy: not acquired now
    const auto started = steady::now();
    try {
      auto out = with_lane(caller_, req.deadline, [&](connection& c) {
        if (!req.fence.empty()) return acquire_fenced_on(c, req, us);
        auto got = returning_ ? acquire_returning(c, req, us) : acquire_plain(c, req, us);
        if (got.acquired && req.fair && returning_) claim_wake_lock(c, req.name, req.owner, req.deadline);
        return got;
      });
      out.started = started;
      return out;
    } catch (const deadlock_detected&) {
      // Still a deadlock victim (or, on Galera, still losing certification to other nodes' writes
      // of the row) at the deadline: the upsert was rolled back whole, so nothing was acquired.
      return {};
    }
  }

  std::vector<std::size_t> renew(std::span<const renew_item> items, steady::time_point deadline) override {
    if (items.empty()) return {};
    std::string json = "[";
    for (std::size_t i = 0; i < items.size(); ++i) {
      const renew_item& it = items[i];
      if (i) json += ',';
      json += "{\"i\":" + std::to_string(i) + ",\"n\":\"";
      append_hex(json, it.lease.name);
      json += "\",\"o\":\"";
      append_hex(json, it.lease.owner);
      json += "\",\"t\":" + std::to_string(it.lease.token) +
              ",\"us\":" + std::to_string(static_cast<std::int64_t>(it.ttl.count()) * 1000) + "}";
    }
    json += ']';
    auto lock = lock_lane(watchdog_mutex_, deadline, backend_name, "lease_renew");
    return with_lane(watchdog_, deadline, [&](connection& c) {
      count_statement();
      const std::int64_t n = c.execute(sql_.renew, {json}, "lease_renew", true);
      std::vector<std::size_t> matched;
      if (n == static_cast<std::int64_t>(items.size())) {
        // Every row changed (items are distinct names), so every item passed the owner check.
        for (std::size_t i = 0; i < items.size(); ++i) matched.push_back(i);
        return matched;
      }
      // Some did not, or an expiry did not move (already later, or the same microsecond): ask.
      count_statement();
      for (const result_row& r : c.query(sql_.renew_check, {json}, "lease_renew", true)) {
        const std::int64_t i = to_int(r[0]);
        if (i >= 0 && static_cast<std::size_t>(i) < items.size()) matched.push_back(static_cast<std::size_t>(i));
      }
      std::sort(matched.begin(), matched.end());
      matched.erase(std::unique(matched.begin(), matched.end()), matched.end());
      return matched;
    });
  }

  release_outcome release(const release_request& req, lane on) override {
    if (on == lane::watchdog) {
      auto lock = lock_lane(watchdog_mutex_, req.deadline, backend_name, "lease_release");
      return with_lane(watchdog_, req.deadline, [&](connection& c) { return release_on(watchdog_, c, req); });
    }
    auto lock = lock_lane(caller_mutex_, req.deadline, backend_name, "lease_release");
    return with_lane(caller_, req.deadline, [&](connection& c) { return release_on(caller_, c, req); });
  }

  bool force_release(const std::string& name) override {
    std::lock_guard lock(caller_mutex_);
    return with_lane(caller_, steady::now() + io_timeout, [&](connection& c) {
      count_statement();
      const bool freed = c.execute(sql_.force_release, {name}, "lease_force_release", true) > 0;
      if (caller_.wake_locks.count(name)) release_wake_lock(caller_, c, name);
      return freed;
    });
  }

  std::optional<lock_info> inspect(const std::string& name, steady::time_point deadline) override {
    return first_lock_row(sql_.inspect, "lease_inspect", {name}, deadline);
  }

  bool guards_hold_off_readers() const noexcept override { return true; }

  std::optional<lock_info> inspect_writer_after_guards(const std::string& name, lock_wait mode,
                                                       steady::time_point deadline) override {
    if (mode == lock_wait::nowait) {
      return first_lock_row(sql_.writer_check_nowait, "rw_writer_check_nowait", {name}, deadline);
    }
    return first_lock_row(sql_.writer_check, "rw_writer_check", {name}, deadline);
  }

  std::optional<lock_info> live_in_range_after_guards(const std::string& lo, const std::string& hi,
                                                      lock_wait mode, steady::time_point deadline) override {
    const bool nowait = mode == lock_wait::nowait;
    auto lock = lock_lane(caller_mutex_, caller_lane_until(deadline), backend_name, "rw_readers_check");
    return with_lane(caller_, deadline, [&](connection& c) -> std::optional<lock_info> {
      count_statement();
      result_rows r = c.query(nowait ? sql_.readers_check_nowait : sql_.readers_check, {lo, hi},
                              nowait ? "rw_readers_check_nowait" : "rw_readers_check", true);
      std::optional<lock_info> last;
      for (const auto& row : r) {
        auto i = row_to_info(row);
        if (i.time_left.count() > 0 && (!last || i.time_left > last->time_left)) last = std::move(i);
      }
      return last;
    });
  }

  std::optional<lock_info> live_in_range(const std::string& lo, const std::string& hi,
                                         steady::time_point deadline) override {
    return first_lock_row(sql_.live_range, "lease_live_in_range", {lo, hi}, deadline);
  }

  std::vector<lock_info> list_locks() override {
    std::lock_guard lock(caller_mutex_);
    return with_lane(caller_, steady::now() + io_timeout, [&](connection& c) {
      count_statement();
      std::vector<lock_info> out;
      for (const result_row& r : c.query(sql_.list, {}, "lease_list", true)) out.push_back(row_to_info(r));
      return out;
    });
  }

  /// queue_state.sql answers a handed-over lease's token and time left, and queue_poll takes its
  /// wake-up lock as an acquire would.
  bool handed_lease_from_poll() const noexcept override { return true; }

  queue_outcome queue_poll(const queue_request& req) override {
    std::unique_lock lock(caller_mutex_, std::defer_lock);
    if (!lock.try_lock_until(req.lane_until())) return {};  // the lane stayed busy: nothing sent, poll again
    return with_lane(caller_, req.deadline, [&](connection& c) {
      const std::int64_t ttl = req.ttl.count();
      if (req.seq == 0) {
        count_statement();
        c.execute(sql_.queue_prune, {req.name}, "queue_prune", true);
      }
      if (req.refresh || req.seq == 0) {
        count_statement();
        c.execute(sql_.queue_enter, {req.name, req.owner, req.holder, ttl, ttl}, "queue_enter", true);
      }
      // A handed-over lease is taken from the read (handed_lease_from_poll), with the wake-up lock
      // an acquire would take beside it, in the same statement.
      // With no time left to wait for it, it is still asked for without waiting (as the upsert does).
      const double wake_wait = wake_lock_wait_seconds(req.deadline);
      const bool want = wants_wake_lock(req.name);
      count_statement();
      result_rows r = c.query(sql_.queue_state,
                              {static_cast<std::int64_t>(want ? 1 : 0), waker::key(scope_, req.name),
                               std::max(wake_wait, 0.0), req.owner},
                              "queue_state", true);
      queue_outcome out;
      if (r.empty() || r[0].size() < 3) return out;
      out.seq = to_int(r[0][0]);
      out.ahead = to_int(r[0][1]);
      out.mine = truthy(r[0][2]);
      // No lock row (the name never acquired) is a state too, "none" (as the waker reads it): the
      // releases before the waiter connection's first look are counted from it.
      if (waker_ && r[0].size() > 3) waker_->note_state(req.name, r[0][3] ? *r[0][3] : std::string("none"));
      if (out.mine && r[0].size() > 6 && r[0][4] && r[0][5]) {
        out.token = to_int(r[0][4]);
        out.time_left = std::max(floor_ms(to_int(r[0][5])), std::chrono::milliseconds(0));
        // As outcome_of: taken now, or held already on this connection (now this owner's).
        if (want ? truthy(r[0][6]) : caller_.wake_locks.count(req.name) > 0) caller_.wake_locks[req.name] = req.owner;
      }
      return out;
    });
  }

  void queue_leave(const std::string& owner, steady::time_point deadline) override {
    auto lock = lock_lane(caller_mutex_, deadline, backend_name, "queue_leave");
    with_lane(caller_, deadline, [&](connection& c) {
      count_statement();
      c.execute(sql_.queue_leave, {owner}, "queue_leave", true);
      return 0;
    });
  }

  std::vector<queue_waiter> list_queue() override {
    std::lock_guard lock(caller_mutex_);
    return with_lane(caller_, steady::now() + io_timeout, [&](connection& c) {
      count_statement();
      std::vector<queue_waiter> out;
      for (const result_row& r : c.query(sql_.queue_list, {}, "queue_list", true)) {
        out.push_back({r[0].value_or(""), r[1].value_or(""), to_int(r[2]), std::chrono::milliseconds(to_int(r[3])),
                       std::chrono::milliseconds(to_int(r[4]))});
      }
      return out;
    });
  }

  // Like PostgreSQL's, the INSERT IGNORE waits only for another first use of the same name.
  std::optional<int> semaphore_permits(const std::string& name, int permits, steady::time_point deadline) override {
    std::unique_lock lock(caller_mutex_, std::defer_lock);
    if (!lock.try_lock_until(caller_lane_until(deadline))) return std::nullopt;  // busy: nothing sent
    return with_lane(caller_, deadline, [&](connection& c) -> int {
      if (!options_.read_only) {
        count_statement();
        c.execute(sql_.semaphore_register, {name, static_cast<std::int64_t>(permits)}, "semaphore_register", true);
      }
      count_statement();
      result_rows r = c.query(sql_.semaphore_permits, {name}, "semaphore_permits", true);
      if (r.empty()) return 0;
      return static_cast<int>(to_int(r[0][0]));
    });
  }

  std::unique_ptr<session> begin(const transaction_options& options) override {
    if (options_.read_only) throw invalid_argument("mysql: transactions need a client that is not read-only");
    return make_owned_session(pool_, options, options_);
  }

  void set_wake_sink(wake_sink* sink) override {
    if (waker_) waker_->set_sink(sink);
  }
  bool watch(const std::string& name, steady::time_point) override { return waker_ && waker_->watch(name); }
  void unwatch(const std::string& name) override {
    if (waker_) waker_->unwatch(name);
  }

 private:
  // ---- lanes ------------------------------------------------------------------------------------

  /// Open a lane's connection: session time zone UTC, server checks (version, durability).
  void open_lane(lane_state& l, steady::time_point deadline) {
    int fd = -1;
    const int connect_s = std::max(1, whole_seconds_up(time_until(deadline, std::chrono::milliseconds(1)), 3600));
    auto raw = open_connection(params_, /*found_rows=*/false, lease_read_timeout_s, &fd, connect_s, deadline);
    auto c = std::make_unique<connection>(std::move(raw));
    c->set_socket_fd(fd);
    auto armed = timer_.arm(fd, deadline);
    c->execute(sql_.time_zone, {}, "session_time_zone");
    const server_traits& t = c->traits();
    require_supported(t);
    require_durable(t, options_.allow_unsafe_durability);
    if (t.read_only && !options_.read_only) {
      // A replica: an account with READ ONLY ADMIN could take a lock here that the primary's
      // clients never see. Reading (status) is fine: open the client read_only for that.
      throw database_error(
          "mysql: the server runs with read_only = ON (a replica?): a lock taken there is not seen by clients of "
          "the primary; connect to the primary, or open the client read_only (status, inspect)",
          std::string(backend_name), "", "server_settings");
    }
    if (t.wsrep_on) {
      // Galera: reads wait for the writes the cluster committed before them; GET_LOCK wake-ups
      // cannot cross nodes, so the waker reads rows instead and no wake-up lock is taken.
      c->execute(sql_.sync_wait, {}, "session_sync_wait");
      galera_ = true;
    }
    if (fd < 0 && !warned_no_socket_.exchange(true)) {
      log_message(options_, log_level::warning,
                  "mysql: the lease connection's socket could not be identified; a statement without an answer "
                  "is bounded by the " +
                      std::to_string(lease_read_timeout_s) + " s read timeout only");
    }
    // INSERT ... RETURNING: MariaDB 10.5+; MySQL 8 has none and takes a second read.
    returning_ = t.mariadb;
    if (armed.fired())
      throw connection_lost("mysql connect: no answer in time", std::string(backend_name), "", "connect");
    l.conn = std::move(c);
    l.wake_locks.clear();  // a new connection holds no GET_LOCK
  }

  void drop_lane(lane_state& l) noexcept {
    l.conn.reset();
    l.wake_locks.clear();  // the server released them with the connection
  }

  /// Run `f` on a lane's connection (caller holds the lane's mutex). A connection the server ended
  /// while idle is replaced before anything is sent. No answer by `deadline`: the socket is shut
  /// down, the connection dropped, connection_lost thrown (the next call reconnects). A deadlock
  /// victim's one-statement transaction was rolled back whole, so `f` is run again from its start:
  /// every statement of `f` before the last must be one that can run twice (it committed already).
  template <class F>
  auto with_lane(lane_state& l, steady::time_point deadline, F&& f) -> decltype(f(std::declval<connection&>())) {
    if (l.conn && !l.conn->alive()) {
      log_message(options_, log_level::info, "mysql: a lease connection went away while idle; reconnecting");
      drop_lane(l);
    }
    if (!l.conn) open_lane(l, deadline);
    if (&l == &caller_) release_stale_wake_locks(deadline);
    for (int attempt = 1;; ++attempt) {
      auto armed = timer_.arm(l.conn->socket_fd(), deadline);
      try {
        auto result = f(*l.conn);
        if (armed.fired()) drop_lane(l);  // answered, but the socket was shut down just after
        return result;
      } catch (const deadlock_detected&) {
        if (armed.fired()) {
          drop_lane(l);
          throw;
        }
        // Galera: a certification conflict (1213 at commit, "WSREP detected deadlock/conflict")
        // is routine when nodes write the same row at once; retried until the deadline.
        const auto pause = std::chrono::milliseconds(std::min(attempt, 20));
        if ((!galera_ && attempt >= max_deadlock_retries) || steady::now() + pause >= deadline) throw;
        std::this_thread::sleep_for(pause);
      } catch (const error& e) {
        const bool timed_out = armed.fired();
        if (timed_out || (l.conn && l.conn->broken())) drop_lane(l);
        if (timed_out) {
          throw connection_lost(std::string("mysql ") + e.statement() +
                                    ": no answer in time; the connection was closed (" + e.what() + ")",
                                std::string(backend_name), e.code(), e.statement());
        }
        throw;
      }
    }
  }

  /// The first lock row that `sql` (statement `name`) answers: inspect, the reader's writer checks,
  /// live_in_range; one statement on the callers' lane.
  std::optional<lock_info> first_lock_row(const std::string& sql, std::string_view name,
                                          const std::vector<value>& params, steady::time_point deadline) {
    auto lock = lock_lane(caller_mutex_, caller_lane_until(deadline), backend_name, name);
    return with_lane(caller_, deadline, [&](connection& c) -> std::optional<lock_info> {
      count_statement();
      result_rows r = c.query(sql, params, name, true);
      if (r.empty()) return std::nullopt;
      return row_to_info(r[0]);
    });
  }

  // ---- acquire and release ----------------------------------------------------------------------

  /// Whether an acquisition of `req` takes the wake-up lock beside the lease (notifications on, not
  /// on Galera, and this caller's connection does not hold it already).
  bool wants_wake_lock(const acquire_request& req) const { return wants_wake_lock(req.name); }
  bool wants_wake_lock(const std::string& name) const {
    return options_.notifications && !galera_ && !caller_.wake_locks.count(name);
  }

  /// How long a fair holder's statement may wait for its wake-up lock (claim_wake_lock): up to
  /// fair_wake_lock_wait, leaving 50 ms of the statement's budget; MySQL 8 (whole seconds only)
  /// does not wait. Negative: no time for it.
  double wake_lock_wait_seconds(steady::time_point deadline) const {
    if (!returning_) return 0.0;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
    const auto wait = std::min(left - std::chrono::milliseconds(50), fair_wake_lock_wait);
    return wait.count() <= 0 ? -1.0 : static_cast<double>(wait.count()) / 1000.0;
  }

  /// MariaDB: the upsert with its RETURNING (lease_acquire or lease_acquire_fenced), wake-up lock
  /// included. `params` are the upsert's own; the RETURNING's follow.
  /// `sql_no_lock_wait`: the same upsert for a single try (acquire_request::no_lock_wait): a row
  /// lock it meets (the live holder's guarded transaction) is "not acquired" at once, with the
  /// row's holder read plainly, instead of a wait until the statement deadline closes the connection.
  acquire_outcome upsert_returning(connection& c, const std::string& sql, const std::string& sql_no_lock_wait,
                                   std::vector<value> params, const acquire_request& req) {
    const bool want = wants_wake_lock(req);
    params.insert(params.end(),
                  {req.owner, req.owner, static_cast<std::int64_t>(want ? 1 : 0), waker::key(scope_, req.name)});
    count_statement();
    result_rows r;
    try {
      r = c.query(req.no_lock_wait ? sql_no_lock_wait : sql, params, "lease_acquire", true);
    } catch (const lock_not_available&) {
      if (!req.no_lock_wait) throw;
      // Only the statement was rolled back: a plain read tells who holds the row (none live: a
      // guarded transaction of an expired lease, or another acquire or release in flight).
      acquire_outcome out;
      count_statement();
      result_rows row = c.query(sql_.inspect, {req.name}, "lease_inspect", true);
      if (!row.empty()) {
        const lock_info i = row_to_info(row[0]);
        if (i.time_left.count() > 0) {
          out.holder = i.holder;
          out.time_left = i.time_left;
        }
      }
      return out;
    }
    if (r.empty() || r[0].size() < 5) {
      throw database_error("mysql lease_acquire: no row returned", std::string(backend_name), "", "lease_acquire");
    }
    return outcome_of(r[0], req, want ? r[0][4] : std::optional<std::string>("1"));
  }

  /// MySQL 8 (no RETURNING): the upsert (lease_acquire_no_returning or its fenced form), then one
  /// read of the row (lease_acquire_result) and, when it was acquired, the wake-up lock.
  acquire_outcome upsert_then_read(connection& c, const std::string& sql, const std::vector<value>& params,
                                   const acquire_request& req) {
    count_statement();
    c.execute(sql, params, "lease_acquire", true);
    count_statement();
    result_rows r = c.query(sql_.acquire_result, {req.owner, req.name}, "lease_acquire", true);
    if (r.empty()) throw database_error("mysql lease_acquire: no row", std::string(backend_name), "", "lease_acquire");
    std::optional<std::string> got("1");
    if (truthy(r[0][0]) && wants_wake_lock(req)) {
      count_statement();
      result_rows w = c.query(sql_.wake_take, {waker::key(scope_, req.name)}, "wake_lock_take");
      got = w.empty() ? std::nullopt : w[0][0];
    }
    return outcome_of(r[0], req, got);
  }

  /// MariaDB: one INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING, wake-up lock included.
  acquire_outcome acquire_returning(connection& c, const acquire_request& req, std::int64_t us) {
    return upsert_returning(c, sql_.acquire, sql_.acquire_no_lock_wait, {req.name, req.holder, req.owner, us}, req);
  }

  /// MySQL 8 (no RETURNING): the upsert, then one read of the row (and the wake-up lock).
  acquire_outcome acquire_plain(connection& c, const acquire_request& req, std::int64_t us) {
    return upsert_then_read(c, sql_.acquire_plain, {req.name, req.holder, req.owner, us}, req);
  }

  /// A reader-writer row: one transaction advances the name's fence (locking it first) and takes
  /// its value as the new token; committed only when the row was acquired (a refused attempt leaves
  /// nothing behind, no commit to flush).
  acquire_outcome acquire_fenced_on(connection& c, const acquire_request& req, std::int64_t us) {
    c.run_simple("START TRANSACTION", "lease_acquire");
    try {
      std::int64_t token = 0;
      count_statement();
      if (returning_) {
        result_rows r = c.query(sql_.fence_advance, {req.fence}, "fence_advance", true);
        if (!r.empty()) token = to_int(r[0][0]);
      } else {
        c.execute(sql_.fence_advance_plain, {req.fence}, "fence_advance", true);
        count_statement();
        result_rows r = c.query(sql_.fence_read, {req.fence}, "fence_advance", true);
        if (!r.empty()) token = to_int(r[0][0]);
      }
      if (token < 1) {
        throw database_error("mysql fence_advance: no token returned", std::string(backend_name), "", "fence_advance");
      }
      if (token == 1) {
        // Created by this transaction: start above the name's rows from before fences existed.
        count_statement();
        result_rows r = c.query(sql_.fence_floor, {req.fence_lo, req.fence_hi, req.fence}, "fence_advance", true);
        const std::int64_t floor = r.empty() ? 0 : to_int(r[0][0]);
        if (floor > token) {
          count_statement();
          c.execute(sql_.fence_lift, {floor, req.fence}, "fence_advance", true);
          token = floor;
        }
      }
      const acquire_outcome out =
          returning_ ? upsert_returning(c, sql_.acquire_fenced, sql_.acquire_fenced_no_lock_wait,
                                        {req.name, req.holder, req.owner, token, us}, req)
                     : upsert_then_read(c, sql_.acquire_fenced_plain, {req.name, req.holder, req.owner, token, us}, req);
      c.run_simple(out.acquired ? "COMMIT" : "ROLLBACK", "lease_acquire");
      return out;
    } catch (...) {
      if (!c.broken()) {
        try {
          c.run_simple("ROLLBACK", "lease_acquire");
        } catch (...) {
        }
      }
      throw;
    }
  }

  acquire_outcome outcome_of(const result_row& row, const acquire_request& req,
                             const std::optional<std::string>& wake) {
    acquire_outcome out;
    if (truthy(row[0])) {
      out.acquired = true;
      out.token = to_int(row[1]);
      // The wake-up lock was taken now (1), or is held already from an earlier acquisition of the
      // name on this connection: it now belongs to this one. 0: a waiter held it for an instant;
      // waiters elsewhere then rely on polling.
      if (truthy(wake)) caller_.wake_locks[req.name] = req.owner;
      return out;
    }
    out.holder = row[2].value_or("");
    const auto left = row[3] ? floor_ms(to_int(row[3])) : std::chrono::milliseconds(0);
    out.time_left = left.count() > 0 ? left : std::chrono::milliseconds(0);
    return out;
  }

  /// A fair lease acquired without its wake-up lock (GET_LOCK(key, 0) in the acquire found it
  /// busy): other clients' waiter connections, queued on the releaser's key, take it and let it go
  /// in turn right after a release, and a fair hand-over's new holder often asks in that moment.
  /// Without the lock its own release would wake nobody (waiters then poll), so it waits for it
  /// briefly (MariaDB only: MySQL's GET_LOCK timeout is whole seconds). Not taken in time: as
  /// before, waiters poll. A lease handed over and taken from queue_poll's read gets the same wait
  /// in that read (queue_state.sql).
  void claim_wake_lock(connection& c, const std::string& name, const std::string& owner,
                       steady::time_point deadline) {
    if (!options_.notifications || galera_) return;
    if (auto it = caller_.wake_locks.find(name); it != caller_.wake_locks.end()) {
      it->second = owner;
      return;
    }
    const double wait = wake_lock_wait_seconds(deadline);
    if (wait <= 0) return;
    count_statement();
    result_rows w = c.query(sql_.wake_take_wait, {waker::key(scope_, name), wait}, "wake_lock_take");
    if (!w.empty() && truthy(w[0][0])) caller_.wake_locks[name] = owner;
  }

  bool owns_wake_lock(const lane_state& l, const release_request& req) const {
    auto it = l.wake_locks.find(req.lease.name);
    return it != l.wake_locks.end() && it->second == req.lease.owner;
  }

  bool release_on(lane_state& l, connection& c, const release_request& req) {
    if (req.hand_over) return fair_release_on(l, c, req);
    const std::int64_t min_us = static_cast<std::int64_t>(req.min_hold.count()) * 1000;
    const value owner(req.lease.owner);
    const value token(req.lease.token);
    const bool ours = owns_wake_lock(l, req);
    if (returning_) {
      count_statement();
      result_rows r = c.query(sql_.release,
                              {req.lease.name,
                               token,
                               owner,
                               token,
                               token,
                               min_us,
                               min_us,
                               owner,
                               token,
                               token,
                               owner,
                               token,
                               token,
                               owner,
                               token,
                               token,
                               owner,
                               token,
                               token,
                               token,
                               static_cast<std::int64_t>(ours ? 1 : 0),
                               waker::key(scope_, req.lease.name)},
                              "lease_release", true);
      if (r.empty() || r[0].size() < 3) {
        throw database_error("mysql lease_release: no row returned", std::string(backend_name), "", "lease_release");
      }
      const bool kept = truthy(r[0][0]);
      const bool freed = truthy(r[0][1]);
      if (freed && ours) l.wake_locks.erase(req.lease.name);
      if (!kept && !freed && ours) release_wake_lock(l, c, req.lease.name);
      // Sent on the watchdog lane (the outbox): the caller lane's connection holds the key, and lets
      // it go at its next use if it still belongs to this owner (release_stale_wake_locks); also
      // when the release matched nothing (a lease lost, or a waiter giving up that took the key in
      // the read that found the lock handed to it and lost the row before its acquire).
      if (!kept && &l != &caller_) note_stale_wake_lock(req);
      return kept || freed;
    }
    count_statement();
    const bool matched =
        c.execute(sql_.release_plain, {min_us, min_us, req.lease.name, owner, token, token}, "lease_release", true) > 0;
    if (ours) release_wake_lock(l, c, req.lease.name);
    if (&l != &caller_) note_stale_wake_lock(req);  // as above, matched or not
    return matched;
  }

  // A fair holder's release: one statement (fair_release.sql) hands the lock over (or frees it) and
  // expires the holder's ticket, so a fair release commits once. Deadlock victims are rolled back
  // and run again by with_lane. A caller that holds nothing (a waiter giving up its call) matches
  // no row: its ticket is then deleted (queue_leave.sql) and the release sent again, last, so a
  // lease handed to it before the delete is handed on (with the ticket gone, no later release can
  // hand it the lock; the rerun after a deadlock starts again at the first). Nothing reads the holder's own ticket meanwhile: queue_state.sql
  // and queue_list.sql leave a live holder's ticket out, and fair_release.sql picks another owner's.
  bool fair_release_on(lane_state& l, connection& c, const release_request& req) {
    const value owner(req.lease.owner);
    const value token(req.lease.token);
    const bool ours = owns_wake_lock(l, req);
    auto release = [&] {
      count_statement();
      return c.execute(sql_.fair_release, {owner, req.lease.name, owner, req.lease.name, owner, token, token},
                       "fair_release", true) > 0;
    };
    bool matched = release();
    if (!matched) {
      count_statement();
      c.execute(sql_.queue_leave, {owner}, "queue_leave", true);
      matched = release();
    }
    if (ours) release_wake_lock(l, c, req.lease.name);
    if (&l != &caller_) note_stale_wake_lock(req);  // matched or not: see release_on
    return matched;
  }

  void release_wake_lock(lane_state& l, connection& c, const std::string& name) {
    l.wake_locks.erase(name);
    count_statement();
    c.query(sql_.wake_release, {waker::key(scope_, name)}, "wake_lock_release");
  }

  void note_stale_wake_lock(const release_request& req) {
    std::lock_guard lock(stale_mutex_);
    stale_wake_locks_.emplace_back(req.lease.name, req.lease.owner);
  }

  /// Caller lane (its mutex held): let go of wake-up locks of leases the watchdog lane released.
  void release_stale_wake_locks(steady::time_point deadline) {
    std::vector<std::pair<std::string, std::string>> stale;
    {
      std::lock_guard lock(stale_mutex_);
      stale.swap(stale_wake_locks_);
    }
    for (const auto& [name, owner] : stale) {
      auto it = caller_.wake_locks.find(name);
      if (it == caller_.wake_locks.end() || it->second != owner) continue;
      auto armed = timer_.arm(caller_.conn->socket_fd(), deadline);
      try {
        release_wake_lock(caller_, *caller_.conn, name);
      } catch (const error&) {
        drop_lane(caller_);
        throw;
      }
    }
  }

  int read_schema_version(connection& c) {
    try {
      count_statement();
      result_rows r = c.query(sql_.schema_version, {}, "schema_version", true);
      const int v = r.empty() ? 0 : static_cast<int>(to_int(r[0][0]));
      if (v == 0) return 0;
      count_statement();
      c.query(sql_.lock_table_probe, {}, "schema_version", true);
      return v;
    } catch (const schema_missing&) {
      return 0;
    }
  }

  void unlock_migration(connection& c) noexcept {
    try {
      count_statement();
      c.query(sql_.migrate_unlock, {scope_}, "migrate_unlock");
    } catch (const std::exception& e) {
      log_message(options_, log_level::warning, std::string("mysql: releasing the migration lock failed: ") + e.what());
    }
  }

  client_options options_;
  connect_params params_;
  std::string table_;
  std::string scope_;  // database.table: the namespace of this table's GET_LOCK keys
  statement_set sql_;
  deadline_timer timer_;

  fifo_mutex caller_mutex_;  // callers take turns on their connection in arrival order
  lane_state caller_;
  fifo_mutex watchdog_mutex_;  // the watchdog thread, explicit renew() and re-sent releases
  lane_state watchdog_;
  std::atomic<bool> returning_{true};
  std::atomic<bool> galera_{false};  // wsrep_on: a Galera node (see open_lane)
  std::atomic<bool> warned_no_socket_{false};
  // Releases sent on the watchdog lane that freed a lease whose wake-up lock the caller lane holds:
  // (name, owner), released by the caller lane before its next statement.
  std::mutex stale_mutex_;
  std::vector<std::pair<std::string, std::string>> stale_wake_locks_;

  std::shared_ptr<connection_pool> pool_;
  std::unique_ptr<waker> waker_;
};

}  // namespace
}  // namespace mysql

std::unique_ptr<backend> make_mysql_backend(const backend_config& config) {
  return std::make_unique<mysql::mysql_backend>(config);
}

}  // namespace sqllock::detail
