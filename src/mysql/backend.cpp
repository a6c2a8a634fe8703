// The MySQL/MariaDB backend: lease statements on one connection, migrations, GET_LOCK wake-ups.
#include <cppconn/connection.h>
#include <cppconn/exception.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <set>
#include <thread>
#include <unordered_set>

#include "mysql/mysql_internal.hpp"
#include "sqllock/error.hpp"

namespace sqllock::detail {
namespace mysql {
namespace {

constexpr int lease_read_timeout_s = 30;
constexpr auto idle_check_after = std::chrono::seconds(5);
constexpr int migrate_lock_timeout_s = 120;
constexpr int max_deadlock_retries = 5;
/// holder_id is VARBINARY(512) in the lock table.
constexpr std::size_t max_holder_bytes = 512;

std::int64_t to_int(const std::optional<std::string>& v) {
  if (!v) return 0;
  try {
    return std::stoll(*v);
  } catch (...) {
    return 0;
  }
}

/// The rendered statements of one lock table.
struct statement_set {
  explicit statement_set(const std::string& table)
      : acquire(statement_text("lease_acquire", table)),
        acquire_plain(statement_text("lease_acquire_no_returning", table)),
        acquire_result(statement_text("lease_acquire_result", table)),
        holder(statement_text("lease_holder", table)),
        renew(statement_text("lease_renew", table)),
        renew_check(statement_text("lease_renew_check", table)),
        release(statement_text("lease_release", table)),
        release_plain(statement_text("lease_release_no_returning", table)),
        release_result(statement_text("lease_release_result", table)),
        force_release(statement_text("lease_force_release", table)),
        inspect(statement_text("lease_inspect", table)),
        list(statement_text("lease_list", table)),
        wake_take(statement_text("wake_lock_take", table)),
        wake_release(statement_text("wake_lock_release", table)),
        wake_wait(statement_text("wake_wait", table)),
        schema_version(statement_text("schema_version", table)),
        schema_record(statement_text("schema_record", table)),
        migrate_lock(statement_text("migrate_lock", table)),
        migrate_unlock(statement_text("migrate_unlock", table)),
        time_zone(statement_text("session_time_zone", table)) {}
  std::string acquire, acquire_plain, acquire_result, holder, renew, renew_check, release,
      release_plain, release_result,
      force_release, inspect, list, wake_take, wake_release, wake_wait, schema_version,
      schema_record, migrate_lock, migrate_unlock, time_zone;
};

/// MariaDB 10.6+ (JSON_TABLE, SKIP LOCKED, INSERT ... RETURNING) or MySQL 8.0+ (JSON_TABLE).
void require_supported(const server_traits& t) {
  const bool ok = t.mariadb ? (t.major > 10 || (t.major == 10 && t.minor >= 6)) : t.major >= 8;
  if (!ok) {
    throw database_error("mysql: server version " + std::to_string(t.major) + "." +
                             std::to_string(t.minor) +
                             " is too old; sqllock needs MariaDB 10.6+ or MySQL 8.0+",
                         std::string(backend_name), "", "connect");
  }
}

/// Lower-case hex of arbitrary bytes (names and holders travel through JSON as hex).
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
  return info;
}

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
    std::lock_guard lock(lease_mutex_);
    connect_lease();  // unreachable: connection_lost from the factory, as connect() promises
  }

  ~mysql_backend() override {
    {
      std::lock_guard lock(wait_mutex_);
      stopping_ = true;
    }
    wait_cv_.notify_all();
    if (waiter_.joinable()) waiter_.join();
  }

  std::string_view kind() const noexcept override { return backend_name; }

  int schema_version() override {
    return with_lease([&](connection& c) { return read_schema_version(c); });
  }

  int migrate() override {
    // A connection of its own: waiting for another process's migration must not stall the lease
    // connection (and with it the watchdog's renewals).
    connection c(open_connection(params_, /*found_rows=*/false, 0));
    count_statement();
    result_rows got = c.query(sql_.migrate_lock,
                              {scope_, static_cast<std::int64_t>(migrate_lock_timeout_s)},
                              "migrate_lock");
    if (got.empty() || !got[0][0] || *got[0][0] != "1") {
      throw database_error("mysql migrate_lock: another migrate held the migration lock for " +
                               std::to_string(migrate_lock_timeout_s) + " s",
                           std::string(backend_name), "", "migrate_lock");
    }
    // Closing the connection would release the GET_LOCK too; release it explicitly anyway.
    try {
      const int current = read_schema_version(c);
      for (const embedded_migration& m : embedded_migrations("mysql")) {
        if (m.version <= current) continue;
        const std::string name = "migration " + std::string(m.file);
        for (const std::string& stmt : split_statements(render_sql(m.text, table_, dialect::mysql))) {
          count_statement();
          c.execute(stmt, {}, name);
        }
        count_statement();
        c.execute(sql_.schema_record, {static_cast<std::int64_t>(m.version), std::string(m.file)},
                  "schema_record", true);
      }
    } catch (...) {
      unlock_migration(c);
      throw;
    }
    unlock_migration(c);
    return read_schema_version(c);
  }

  acquire_outcome acquire(const std::string& name, const std::string& holder,
                          std::chrono::milliseconds ttl) override {
    const std::int64_t us = static_cast<std::int64_t>(ttl.count()) * 1000;
    if (holder.empty() || holder.size() > max_holder_bytes) {
      throw invalid_argument("holder id must be 1 to " + std::to_string(max_holder_bytes) +
                             " bytes for the mysql backend");
    }
    return with_lease([&](connection& c) {
      return returning_ ? acquire_returning(c, name, holder, us) : acquire_plain(c, name, holder, us);
    });
  }

  std::vector<std::size_t> renew(std::span<const renew_item> items) override {
    if (items.empty()) return {};
    std::string json = "[";
    std::unordered_set<std::string_view> names;
    bool distinct = true;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const renew_item& it = items[i];
      if (i) json += ',';
      json += "{\"i\":" + std::to_string(i) + ",\"n\":\"";
      append_hex(json, it.name);
      json += "\",\"h\":\"";
      append_hex(json, it.holder);
      json += "\",\"t\":" + std::to_string(it.token) +
              ",\"us\":" + std::to_string(static_cast<std::int64_t>(it.ttl.count()) * 1000) + "}";
      distinct = names.insert(it.name).second && distinct;
    }
    json += ']';
    return with_lease([&](connection& c) {
      count_statement();
      const std::int64_t n = c.execute(sql_.renew, {json}, "lease_renew", true);
      std::vector<std::size_t> matched;
      if (distinct && n == static_cast<std::int64_t>(items.size())) {
        // Every row changed, so every item passed the owner check.
        for (std::size_t i = 0; i < items.size(); ++i) matched.push_back(i);
      } else {
        // Some did not (or the expiry did not move within the same microsecond): ask.
        count_statement();
        for (const result_row& r : c.query(sql_.renew_check, {json}, "lease_renew", true)) {
          const std::int64_t i = to_int(r[0]);
          if (i >= 0 && static_cast<std::size_t>(i) < items.size()) {
            matched.push_back(static_cast<std::size_t>(i));
          }
        }
        std::sort(matched.begin(), matched.end());
        matched.erase(std::unique(matched.begin(), matched.end()), matched.end());
      }
      // Keep the wake-up locks in step: drop those of lost leases, retake missing ones (e.g.
      // after a reconnect, or when a waiter held the lock for a moment at acquisition).
      std::size_t next = 0;
      for (std::size_t i = 0; i < items.size(); ++i) {
        const bool ok = next < matched.size() && matched[next] == i;
        if (ok) ++next;
        const renew_item& it = items[i];
        if (!ok) {
          drop_wake_lock_of(c, it.name, it.holder, it.token);
        } else if (options_.notifications && !wake_locks_.count(it.name)) {
          take_wake_lock(c, it.name, it.holder, it.token);
        }
      }
      return matched;
    });
  }

  release_outcome release(const std::string& name, const std::string& holder, std::int64_t token,
                          std::optional<std::int64_t> expected_holds) override {
    return with_lease([&](connection& c) {
      return returning_ ? release_returning(c, name, holder, token, expected_holds)
                        : release_plain(c, name, holder, token, expected_holds);
    });
  }

  bool force_release(const std::string& name) override {
    return with_lease([&](connection& c) {
      count_statement();
      const bool freed = c.execute(sql_.force_release, {name}, "lease_force_release", true) > 0;
      if (freed && wake_locks_.count(name)) {
        // Freed a lease of this very client: let waiters elsewhere know at once.
        release_wake_lock(c, name);
      }
      return freed;
    });
  }

  std::optional<lock_info> inspect(const std::string& name) override {
    return with_lease([&](connection& c) -> std::optional<lock_info> {
      count_statement();
      result_rows r = c.query(sql_.inspect, {name}, "lease_inspect", true);
      if (r.empty()) return std::nullopt;
      return row_to_info(r[0]);
    });
  }

  std::vector<lock_info> list_locks() override {
    return with_lease([&](connection& c) {
      count_statement();
      std::vector<lock_info> out;
      for (const result_row& r : c.query(sql_.list, {}, "lease_list", true)) {
        out.push_back(row_to_info(r));
      }
      return out;
    });
  }

  std::unique_ptr<session> begin(const transaction_options& options) override {
    return make_owned_session(pool_, options, options_);
  }

  void set_wake_sink(wake_sink* sink) override {
    // Waits for a wake() in progress: after set_wake_sink(nullptr) the old sink is never called.
    std::lock_guard lock(sink_mutex_);
    sink_ = sink;
  }

  void watch(const std::string& name) override {
    if (!options_.notifications) return;
    {
      std::lock_guard lock(wait_mutex_);
      if (watched_[name]++ == 0) newly_watched_.insert(name);
      if (!waiter_.joinable() && !stopping_) waiter_ = std::thread([this] { waiter_loop(); });
    }
    wait_cv_.notify_all();
  }

  void unwatch(const std::string& name) override {
    std::lock_guard lock(wait_mutex_);
    auto it = watched_.find(name);
    if (it != watched_.end() && --it->second <= 0) watched_.erase(it);
  }

 private:
  // ---- lease connection ----------------------------------------------------------------------

  void connect_lease() {
    auto raw = open_connection(params_, /*found_rows=*/false, lease_read_timeout_s);
    auto c = std::make_unique<connection>(std::move(raw));
    c->execute(sql_.time_zone, {}, "session_time_zone");
    const server_traits& t = c->traits();
    require_supported(t);
    // INSERT ... RETURNING: MariaDB 10.5+; MySQL 8 has none and takes a second read.
    returning_ = t.mariadb;
    lease_ = std::move(c);
    wake_locks_.clear();  // a new connection holds no GET_LOCK
  }

  void drop_lease() noexcept {
    lease_.reset();
    wake_locks_.clear();  // the server released them with the connection
  }

  template <class F>
  auto with_lease(F&& f) -> decltype(f(std::declval<connection&>())) {
    std::lock_guard lock(lease_mutex_);
    if (lease_ && std::chrono::steady_clock::now() - lease_->last_used() > idle_check_after) {
      bool ok = false;
      try {
        ok = lease_->raw().isValid();
      } catch (...) {
      }
      if (!ok) {
        log_message(options_, log_level::info, "mysql: lease connection went away while idle; reconnecting");
        drop_lease();
      }
    }
    if (!lease_) connect_lease();
    try {
      // Lease statements run in autocommit mode: a deadlock victim's statement was rolled back
      // whole (InnoDB can pick one when upserts of the same new key race), so it is safe to rerun.
      for (int attempt = 1;; ++attempt) {
        try {
          return f(*lease_);
        } catch (const deadlock_detected&) {
          if (attempt >= max_deadlock_retries) throw;
          std::this_thread::sleep_for(std::chrono::milliseconds(attempt));
        }
      }
    } catch (const error&) {
      if (lease_ && lease_->broken()) {
        log_message(options_, log_level::warning,
                    "mysql: lease connection lost; it is reopened on the next call");
        drop_lease();
      }
      throw;
    }
  }

  // ---- acquire and release ----------------------------------------------------------------------

  /// MariaDB: one INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING, wake-up lock included.
  acquire_outcome acquire_returning(connection& c, const std::string& name,
                                    const std::string& holder, std::int64_t us) {
    const bool already = wake_locks_.count(name) > 0;
    const bool want = options_.notifications && !already;
    count_statement();
    result_rows r = c.query(sql_.acquire,
                            {name, holder, us, holder, holder, holder, holder, us, holder,
                             static_cast<std::int64_t>(want ? 1 : 0), wake_key(name)},
                            "lease_acquire", true);
    if (r.empty() || r[0].size() < 5) {
      throw database_error("mysql lease_acquire: no row returned", std::string(backend_name), "",
                           "lease_acquire");
    }
    const result_row& row = r[0];
    acquire_outcome out;
    if (row[0] && *row[0] == holder) {
      out.acquired = true;
      out.token = to_int(row[1]);
      out.hold_count = to_int(row[2]);
      if (out.hold_count == 1) note_wake_lock(name, holder, out.token, already, row[4]);
      return out;
    }
    out.holder = row[0].value_or("");
    const auto left = row[3] ? floor_ms(to_int(row[3])) : std::chrono::milliseconds(0);
    out.time_left = left.count() > 0 ? left : std::chrono::milliseconds(0);
    return out;
  }

  /// MySQL 8 (no RETURNING): the upsert, then one read of its session variables or of the holder.
  acquire_outcome acquire_plain(connection& c, const std::string& name, const std::string& holder,
                                std::int64_t us) {
    acquire_outcome out;
    count_statement();
    const std::int64_t n = c.execute(sql_.acquire_plain,
                                     {name, holder, us, holder, holder, holder, holder, us},
                                     "lease_acquire", true);
    if (n == 1) {
      // Inserted: the first acquisition of this name ever.
      out.acquired = true;
      out.token = 1;
      out.hold_count = 1;
      take_wake_lock(c, name, holder, out.token);
      return out;
    }
    if (n >= 2) {
      const bool already = wake_locks_.count(name) > 0;
      const bool want = options_.notifications && !already;
      count_statement();
      result_rows r = c.query(sql_.acquire_result,
                              {static_cast<std::int64_t>(want ? 1 : 0), wake_key(name)},
                              "lease_acquire", true);
      if (r.empty()) {
        throw database_error("mysql lease_acquire: no result", std::string(backend_name), "",
                             "lease_acquire");
      }
      out.acquired = true;
      out.token = to_int(r[0][0]);
      out.hold_count = to_int(r[0][1]);
      if (out.hold_count == 1) note_wake_lock(name, holder, out.token, already, r[0][2]);
      return out;
    }
    count_statement();
    result_rows r = c.query(sql_.holder, {name}, "lease_holder", true);
    if (!r.empty()) {
      out.holder = r[0][0].value_or("");
      const auto left = r[0][1] ? floor_ms(to_int(r[0][1])) : std::chrono::milliseconds(0);
      out.time_left = left.count() > 0 ? left : std::chrono::milliseconds(0);
    }
    return out;
  }

  /// After a new acquisition: record the wake-up lock (taken by the statement, or already held by
  /// this connection from an earlier acquisition of the name, which the new one inherits).
  void note_wake_lock(const std::string& name, const std::string& holder, std::int64_t token,
                      bool already, const std::optional<std::string>& got) {
    if (already || (got && *got == "1")) wake_locks_[name] = {holder, token};
  }

  /// MariaDB: one INSERT ... ON DUPLICATE KEY UPDATE ... RETURNING, wake-up lock release included.
  release_outcome release_returning(connection& c, const std::string& name, const std::string& holder,
                                    std::int64_t token, std::optional<std::int64_t> expected_holds) {
    const bool ours = owns_wake_lock(name, holder, token);
    const value expected = expected_holds ? value(*expected_holds) : value();
    count_statement();
    result_rows r = c.query(sql_.release,
                            {name, token, holder, token, expected, expected, holder, token, expected, expected,
                             holder, token, static_cast<std::int64_t>(ours ? 1 : 0), token, wake_key(name)},
                            "lease_release", true);
    release_outcome out;
    if (r.empty() || r[0].size() < 5) {
      throw database_error("mysql lease_release: no row returned", std::string(backend_name), "",
                           "lease_release");
    }
    const result_row& row = r[0];
    const bool same_token = to_int(row[1]) == token;
    if (row[0] && *row[0] == holder && same_token && to_int(row[2]) > 0) {
      // Still ours: one hold released, unless an expected count did not match (row unchanged).
      if (!expected_holds || to_int(row[2]) == *expected_holds - 1) {
        out.released = true;
        out.remaining_holds = to_int(row[2]);
      }
    } else if (!row[0] && same_token && row[3] && *row[3] == "1") {
      out.released = true;  // freed by this very statement
      out.remaining_holds = 0;
      if (ours) wake_locks_.erase(name);
    } else {
      drop_wake_lock_of(c, name, holder, token);
    }
    return out;
  }

  /// MySQL 8: the owner-checked update, then one read of the holds left (and wake-lock release).
  release_outcome release_plain(connection& c, const std::string& name, const std::string& holder,
                                std::int64_t token, std::optional<std::int64_t> expected_holds) {
    release_outcome out;
    const value expected = expected_holds ? value(*expected_holds) : value();
    count_statement();
    const std::int64_t n =
        c.execute(sql_.release_plain, {name, holder, token, expected, expected}, "lease_release", true);
    if (n == 0) {
      // Not ours any more; or, with an expected count that did not match, unchanged and still ours.
      if (!expected_holds) drop_wake_lock_of(c, name, holder, token);
      return out;
    }
    out.released = true;
    const bool ours = owns_wake_lock(name, holder, token);
    count_statement();
    result_rows r = c.query(sql_.release_result,
                            {static_cast<std::int64_t>(ours ? 1 : 0), wake_key(name)},
                            "lease_release", true);
    out.remaining_holds = r.empty() ? 0 : to_int(r[0][0]);
    if (out.remaining_holds == 0 && ours) wake_locks_.erase(name);
    return out;
  }

  int read_schema_version(connection& c) {
    try {
      count_statement();
      result_rows r = c.query(sql_.schema_version, {}, "schema_version", true);
      return r.empty() ? 0 : static_cast<int>(to_int(r[0][0]));
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

  // ---- wake-up locks (GET_LOCK beside each lease held through this connection) ---------------

  std::string wake_key(const std::string& name) const { return scope_ + '/' + name; }

  bool owns_wake_lock(const std::string& name, const std::string& holder, std::int64_t token) const {
    auto it = wake_locks_.find(name);
    return it != wake_locks_.end() && it->second.first == holder && it->second.second == token;
  }

  void take_wake_lock(connection& c, const std::string& name, const std::string& holder,
                      std::int64_t token) {
    if (!options_.notifications) return;
    if (auto it = wake_locks_.find(name); it != wake_locks_.end()) {
      it->second = {holder, token};
      return;
    }
    count_statement();
    result_rows r = c.query(sql_.wake_take, {wake_key(name)}, "wake_lock_take");
    // 0: a waiter holds it for an instant; waiters then rely on polling until the next renew.
    if (!r.empty() && r[0][0] && *r[0][0] == "1") wake_locks_[name] = {holder, token};
  }

  void release_wake_lock(connection& c, const std::string& name) {
    wake_locks_.erase(name);
    count_statement();
    c.query(sql_.wake_release, {wake_key(name)}, "wake_lock_release");
  }

  void drop_wake_lock_of(connection& c, const std::string& name, const std::string& holder,
                         std::int64_t token) {
    if (owns_wake_lock(name, holder, token)) release_wake_lock(c, name);
  }

  // ---- the waiter connection ---------------------------------------------------------------------

  /// Wake local waiters of `name` (if still watched); never under wait_mutex_.
  void wake_name(const std::string& name) {
    {
      std::lock_guard lock(wait_mutex_);
      if (!watched_.count(name)) return;
    }
    std::lock_guard lock(sink_mutex_);
    if (sink_) sink_->wake(name);
  }

  void wake_all_watched() {
    std::vector<std::string> names;
    {
      std::lock_guard lock(wait_mutex_);
      for (const auto& [n, count] : watched_) names.push_back(n);
    }
    for (const auto& n : names) wake_name(n);
  }

  /// The waiter connection's loop: one GET_LOCK wait at a time, round-robin over watched names.
  /// A name whose key was seen held (or is newly watched, so presumed held) and is later found
  /// free (released between two slices, or while another name was waited on) is woken too: every
  /// held -> free transition wakes.
  void waiter_loop() noexcept {
    std::unique_ptr<connection> conn;
    bool had_connection = false;
    std::map<std::string, std::chrono::steady_clock::time_point> quiet_until;
    std::set<std::string> seen_held;
    std::size_t turn = 0;
    for (;;) {
      std::string name;
      {
        std::unique_lock lock(wait_mutex_);
        wait_cv_.wait(lock, [&] { return stopping_ || !watched_.empty(); });
        if (stopping_) break;
        const auto now = std::chrono::steady_clock::now();
        for (auto it = quiet_until.begin(); it != quiet_until.end();) {
          it = (it->second <= now || !watched_.count(it->first)) ? quiet_until.erase(it) : std::next(it);
        }
        // A name is watched because an acquire found it held: presume it held until seen free,
        // so a release before the first look (the loop may be busy with other names) still wakes.
        seen_held.insert(newly_watched_.begin(), newly_watched_.end());
        newly_watched_.clear();
        for (auto it = seen_held.begin(); it != seen_held.end();) {
          it = watched_.count(*it) ? std::next(it) : seen_held.erase(it);
        }
        std::vector<std::string> ready;
        auto earliest = now + std::chrono::milliseconds(50);
        for (const auto& [n, count] : watched_) {
          auto q = quiet_until.find(n);
          if (q == quiet_until.end()) {
            ready.push_back(n);
          } else if (q->second < earliest) {
            earliest = q->second;
          }
        }
        if (ready.empty()) {
          wait_cv_.wait_until(lock, earliest);
          continue;
        }
        name = ready[turn++ % ready.size()];
      }
      if (!conn) {
        try {
          auto raw = open_connection(params_, false, 0);
          conn = std::make_unique<connection>(std::move(raw));
        } catch (const std::exception& e) {
          log_message(options_, log_level::warning,
                      std::string("mysql: waiter connection failed (polling continues): ") + e.what());
          std::unique_lock lock(wait_mutex_);
          wait_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_; });
          continue;
        }
        if (had_connection) {
          // Releases while the connection was down went unseen: let every waiter look now.
          seen_held.clear();
          wake_all_watched();
        }
        had_connection = true;
      }
      try {
        const std::string key = wake_key(name);
        const value slice = conn->traits().mariadb ? value(0.25) : value(std::int64_t{1});
        result_rows r = conn->query(sql_.wake_wait, {key, key, slice}, "wake_wait");
        const std::string got = (!r.empty() && r[0][0]) ? *r[0][0] : std::string("NULL");
        if (got == "1") {
          // The holder released it (or its connection died): let it go again at once and wake.
          conn->query(sql_.wake_release, {key}, "wake_lock_release");
          seen_held.erase(name);
          wake_name(name);
        } else if (got == "0") {
          seen_held.insert(name);  // still held at the end of the slice
        } else if (got == "-1") {
          // Nobody holds it. If it was held when last seen, it was released since: wake. Either
          // way there is nothing to block on; look again shortly (the client polls meanwhile).
          if (seen_held.erase(name)) wake_name(name);
          quiet_until[name] = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
        }
      } catch (const std::exception& e) {
        if (conn->broken()) {
          conn.reset();
          log_message(options_, log_level::info, "mysql: waiter connection lost; reconnecting");
        } else {
          log_message(options_, log_level::warning, std::string("mysql: wake_wait failed: ") + e.what());
        }
        quiet_until[name] = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      }
    }
  }

  client_options options_;
  connect_params params_;
  std::string table_;
  std::string scope_;  // database.table: the namespace of this table's GET_LOCK keys
  statement_set sql_;

  std::mutex lease_mutex_;
  std::unique_ptr<connection> lease_;
  bool returning_ = true;
  /// Wake-up locks held by the lease connection: name -> (holder, token) of the acquisition.
  std::map<std::string, std::pair<std::string, std::int64_t>> wake_locks_;

  std::shared_ptr<connection_pool> pool_;

  std::mutex wait_mutex_;
  std::condition_variable wait_cv_;
  std::map<std::string, int> watched_;
  std::set<std::string> newly_watched_;  // not yet looked at by the waiter loop
  std::mutex sink_mutex_;  // guards sink_ and every call through it
  wake_sink* sink_ = nullptr;
  bool stopping_ = false;
  std::thread waiter_;
};

}  // namespace
}  // namespace mysql

std::unique_ptr<backend> make_mysql_backend(const backend_config& config) {
  return std::make_unique<mysql::mysql_backend>(config);
}

}  // namespace sqllock::detail
