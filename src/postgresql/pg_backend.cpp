// The PostgreSQL backend: lease statements on one mutex-guarded connection, LISTEN wake-ups, sessions.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_set>

#include "postgresql/pg_common.hpp"
#include "postgresql/pg_listener.hpp"

namespace sqllock::detail {

namespace pg {
namespace {

/// Longest wait for the answer to a lease statement before the connection is given up.
constexpr std::chrono::milliseconds io_timeout{10000};

/// One embedded statement, rendered for the configured table.
struct statement {
  std::string name;  ///< the sql/postgresql/<name>.sql file; also the prepared statement's suffix
  std::string sql;
};

statement load(std::string_view name, const std::string& table) {
  return {std::string(name), render_sql(embedded_sql("postgresql", name), table, dialect::postgresql)};
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

class pg_backend final : public backend {
 public:
  explicit pg_backend(const backend_config& config)
      : options_(config.options),
        target_{config.url.original, config.url.redacted(), connect_timeout_of(config.url)},
        table_(config.options.table),
        acquire_(load("lease_acquire", table_)),
        renew_(load("lease_renew", table_)),
        release_(load("lease_release", table_)),
        force_release_(load("lease_force_release", table_)),
        inspect_(load("lease_inspect", table_)),
        list_(load("lease_list", table_)),
        schema_tables_(load("schema_tables", table_)),
        schema_version_(load("schema_version", table_)),
        migrate_lock_(load("migrate_lock", table_)),
        migrate_record_(load("migrate_record", table_)),
        pool_(std::make_shared<connection_pool>(target_, options_)) {
    validate_conninfo(config.url);
    lease_ = connect(target_, &options_);
    if (options_.notifications) listener_ = std::make_unique<listener>(target_, options_);
  }

  ~pg_backend() override { listener_.reset(); }

  std::string_view kind() const noexcept override { return backend_name; }

  int schema_version() override {
    std::lock_guard lock(mutex_);
    return schema_version_locked(/*prepared=*/true);
  }

  int migrate() override {
    std::lock_guard lock(mutex_);
    PGconn* c = lease_conn();
    exec_simple(c, "BEGIN", "migrate");
    try {
      // Key per lock table, so that migrations of different tables do not wait on each other.
      const auto key = static_cast<std::int64_t>(fnv1a("sqllock migrate " + table_));
      exec_params(c, migrate_lock_.sql, {std::to_string(key)}, migrate_lock_.name);
      int current = schema_version_locked(/*prepared=*/false);
      for (const auto& m : embedded_migrations("postgresql")) {
        if (m.version <= current) continue;
        exec_simple(c, render_sql(m.text, table_, dialect::postgresql), "migration " + std::string(m.file));
        exec_params(c, migrate_record_.sql, {std::to_string(m.version)}, migrate_record_.name);
        current = m.version;
      }
      exec_simple(c, "COMMIT", "migrate");
      count_statement();
      return current;
    } catch (...) {
      if (PQstatus(c) == CONNECTION_OK && PQtransactionStatus(c) != PQTRANS_IDLE) {
        try {
          exec_simple(c, "ROLLBACK", "migrate");
        } catch (...) {
        }
      }
      throw;
    }
  }

  acquire_outcome acquire(const std::string& name, const std::string& holder,
                          std::chrono::milliseconds ttl) override {
    std::lock_guard lock(mutex_);
    auto r = run(acquire_, {name, holder, std::to_string(ttl.count())});
    acquire_outcome out;
    if (PQntuples(r.get()) == 0) return out;  // changed under us between snapshot and conflict check
    if (field_text(r.get(), 0, 0) == "t") {
      out.acquired = true;
      out.token = field_int(r.get(), 0, 1);
      out.hold_count = field_int(r.get(), 0, 2);
    } else {
      out.holder = field_text(r.get(), 0, 3);
      out.time_left = std::chrono::milliseconds(std::max<std::int64_t>(0, field_int(r.get(), 0, 4)));
    }
    return out;
  }

  std::vector<std::size_t> renew(std::span<const renew_item> items) override {
    if (items.empty()) return {};
    // One array element per distinct (name, holder, token): an UPDATE ... FROM touches a row once.
    std::map<std::tuple<std::string, std::string, std::int64_t>, std::size_t> slot_of;
    std::vector<std::vector<std::size_t>> members;
    std::vector<std::optional<std::string>> names, holders, tokens;
    std::vector<std::int64_t> ttls;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto& it = items[i];
      auto [pos, fresh] = slot_of.try_emplace({it.name, it.holder, it.token}, members.size());
      if (fresh) {
        members.emplace_back();
        names.push_back(it.name);
        holders.push_back(it.holder);
        tokens.push_back(std::to_string(it.token));
        ttls.push_back(it.ttl.count());
      } else {
        ttls[pos->second] = std::max(ttls[pos->second], static_cast<std::int64_t>(it.ttl.count()));
      }
      members[pos->second].push_back(i);
    }
    std::vector<std::optional<std::string>> ttl_text;
    for (auto t : ttls) ttl_text.push_back(std::to_string(t));

    std::lock_guard lock(mutex_);
    // Answer well within the shortest lease, so that a hung renewal is retried (or the lease
    // declared lost) in time.
    const auto shortest = *std::min_element(ttls.begin(), ttls.end());
    const auto timeout = std::clamp(std::chrono::milliseconds(shortest / 2), std::chrono::milliseconds(100), io_timeout);
    auto r = run(renew_, {array_literal(names), array_literal(holders), array_literal(tokens),
                          array_literal(ttl_text)}, timeout);
    std::vector<std::size_t> matched;
    for (int row = 0; row < PQntuples(r.get()); ++row) {
      const auto slot = field_int(r.get(), row, 0) - 1;
      if (slot < 0 || static_cast<std::size_t>(slot) >= members.size()) continue;
      for (auto i : members[static_cast<std::size_t>(slot)]) matched.push_back(i);
    }
    std::sort(matched.begin(), matched.end());
    return matched;
  }

  release_outcome release(const std::string& name, const std::string& holder, std::int64_t token,
                          std::optional<std::int64_t> expected_holds) override {
    std::lock_guard lock(mutex_);
    // A release whose answer is lost is sent again by the core, with expected_holds.
    auto r = run(release_, release_params(name, holder, token, expected_holds));
    release_outcome out;
    if (PQntuples(r.get()) == 0) return out;
    out.released = true;
    out.remaining_holds = field_int(r.get(), 0, 0);
    return out;
  }

  bool force_release(const std::string& name) override {
    std::lock_guard lock(mutex_);
    // The channel is NULL with notifications off: the statement then sends none.
    text_params params{name, std::nullopt};
    if (options_.notifications) params[1] = channel_for(table_, name);
    auto r = run(force_release_, params);
    return PQntuples(r.get()) > 0;
  }

  std::optional<lock_info> inspect(const std::string& name) override {
    std::lock_guard lock(mutex_);
    auto r = run(inspect_, {name});
    if (PQntuples(r.get()) == 0) return std::nullopt;
    return info(r.get(), 0);
  }

  std::vector<lock_info> list_locks() override {
    std::lock_guard lock(mutex_);
    auto r = run(list_, {});
    std::vector<lock_info> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(info(r.get(), i));
    return out;
  }

  std::unique_ptr<session> begin(const transaction_options& options) override {
    std::string sql = "BEGIN";
    if (options.lock_timeout) {
      const auto ms = std::max<std::int64_t>(1, options.lock_timeout->count());
      sql += "; SET LOCAL lock_timeout = '" + std::to_string(ms) + "ms'";
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
    if (listener_) listener_->set_sink(sink);
  }
  void watch(const std::string& name) override {
    if (listener_) listener_->watch(name, channel_for(table_, name));
  }
  void unwatch(const std::string& name) override {
    if (listener_) listener_->unwatch(name, channel_for(table_, name));
  }

 private:
  static lock_info info(const PGresult* r, int row) {
    lock_info li;
    li.name = field_text(r, row, 0);
    li.holder = field_text(r, row, 1);
    li.fencing_token = field_int(r, row, 2);
    li.hold_count = field_int(r, row, 3);
    li.time_left = std::chrono::milliseconds(field_int(r, row, 4));
    return li;
  }

  int schema_version_locked(bool prepared) {
    auto t = prepared ? run(schema_tables_, {}) : exec_params(lease_conn(), schema_tables_.sql, {}, schema_tables_.name);
    if (field_text(t.get(), 0, 0) != "t" || field_text(t.get(), 0, 1) != "t") return 0;
    auto v = prepared ? run(schema_version_, {})
                      : exec_params(lease_conn(), schema_version_.sql, {}, schema_version_.name);
    return static_cast<int>(field_int(v.get(), 0, 0));
  }

  // The lease connection, reconnected first if it was lost (caller holds mutex_).
  PGconn* lease_conn(std::chrono::milliseconds timeout = io_timeout) {
    // An idle connection the server has ended (pg_terminate_backend, restart) already holds the
    // FATAL message and EOF: reading them without blocking marks it bad, and we reconnect before
    // sending anything, so nothing is ever run twice.
    if (lease_ && PQstatus(lease_.get()) == CONNECTION_OK) {
      if (idle_connection_alive(lease_.get())) return lease_.get();
      log_message(options_, log_level::info, "postgresql: the lease connection was closed by the server; reconnecting");
    }
    prepared_.clear();
    const bool had = lease_ != nullptr;
    lease_.reset();
    lease_ = connect(target_, &options_, timeout);
    if (had) log_message(options_, log_level::info, "postgresql: lease connection re-established");
    return lease_.get();
  }

  text_params release_params(const std::string& name, const std::string& holder, std::int64_t token,
                             std::optional<std::int64_t> expected) const {
    text_params params{name, holder, std::to_string(token)};
    params.push_back(expected ? std::optional<std::string>(std::to_string(*expected)) : std::nullopt);
    // The channel to notify when the hold count reaches 0; NULL sends no notification.
    params.push_back(options_.notifications ? std::optional<std::string>(channel_for(table_, name)) : std::nullopt);
    return params;
  }


  // Run a lease statement on the lease connection (caller holds mutex_). A statement that gets no
  // answer within `timeout` (a hung server, a partition, a row lock held by someone's long
  // transaction) closes the connection and throws connection_lost, so the watchdog is never stuck
  // past a lease's local expiry; the next call reconnects.
  result_ptr run(const statement& s, const text_params& params, std::chrono::milliseconds timeout = io_timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    PGconn* c = lease_conn(timeout);
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    const int n = static_cast<int>(values.size());
    for (int attempt = 0;; ++attempt) {
      if (options_.prepared_statements) {
        const std::string pname = "sqllock_" + s.name;
        if (!prepared_.contains(s.name)) {
          // Parsed once per connection; not counted: statements() counts executions.
          if (!PQsendPrepare(c, pname.c_str(), s.sql.c_str(), n, nullptr)) throw_error(c, nullptr, s.name);
          auto p = await(c, s.name, deadline, timeout);
          if (PQresultStatus(p.get()) != PGRES_COMMAND_OK) throw_error(c, p.get(), s.name);
          prepared_.insert(s.name);
        }
        if (!PQsendQueryPrepared(c, pname.c_str(), n, values.data(), nullptr, nullptr, 0))
          throw_error(c, nullptr, s.name);
      } else {
        if (!PQsendQueryParams(c, s.sql.c_str(), n, nullptr, values.data(), nullptr, nullptr, 0))
          throw_error(c, nullptr, s.name);
      }
      count_statement();
      auto r = await(c, s.name, deadline, timeout);
      const auto st = PQresultStatus(r.get());
      if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
      // Someone ran DISCARD ALL / DEALLOCATE on our session: prepare again once.
      if (attempt == 0 && options_.prepared_statements && sqlstate(r.get()) == "26000") {
        prepared_.clear();
        continue;
      }
      throw_error(c, r.get(), s.name);
    }
  }

  // The result of the command just sent on the lease connection, waiting at most until deadline.
  result_ptr await(PGconn* c, const std::string& name, std::chrono::steady_clock::time_point deadline,
                   std::chrono::milliseconds timeout) {
    result_ptr result;
    for (;;) {
      while (PQisBusy(c)) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
          lease_.reset();
          prepared_.clear();
          throw connection_lost("postgresql " + name + ": no answer within " + std::to_string(timeout.count()) +
                                    " ms; the connection was closed",
                                std::string(backend_name), "", name);
        }
        pollfd p{PQsocket(c), POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 60000))) < 0 && errno != EINTR)
          throw_error(c, nullptr, name);
        if (!PQconsumeInput(c)) throw_error(c, nullptr, name);
      }
      PGresult* r = PQgetResult(c);
      if (!r) break;
      if (!result) result.reset(r);  // one command: one result (later ones are only end markers)
      else PQclear(r);
    }
    if (!result) throw_error(c, nullptr, name);
    return result;
  }

  client_options options_;
  conn_target target_;
  std::string table_;
  statement acquire_, renew_, release_, force_release_, inspect_, list_, schema_tables_, schema_version_,
      migrate_lock_, migrate_record_;

  std::mutex mutex_;  // the lease connection and its prepared statements
  conn_ptr lease_;
  std::unordered_set<std::string> prepared_;

  std::shared_ptr<connection_pool> pool_;
  std::unique_ptr<listener> listener_;
};

}  // namespace
}  // namespace pg

std::unique_ptr<backend> make_postgresql_backend(const backend_config& config) {
  return std::make_unique<pg::pg_backend>(config);
}

}  // namespace sqllock::detail
