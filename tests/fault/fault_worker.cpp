// Fault-harness worker: lock loop with fenced writes, inventory decrements, setup, verify and dump.
//
//   fault_worker setup     --url U --prefix P --names N [--stock S] [--permits N]
//   fault_worker lock      --url U --prefix P --names N --ttl MS --wait MS --log F --index I
//                          [--ttl-max MS] [--nest-pct N] [--nest-ttl shorter|longer|both] [--holder LABEL]
//                          [--guard-pct N]        (N % of the fenced writes also run tx.require_lease(lease):
//                                                  a guarded write must never commit after a takeover)
//                          [--durable-writes 1]   (PostgreSQL: SET LOCAL synchronous_commit = on in the
//                                                  write transaction, for runs whose server default is off)
//                          [--cancel-pct N]       (N % of the acquisitions wait in acquire_for with a stop
//                                                  token requested at a random moment of the wait; after a
//                                                  `cancelled`, the lock row is inspected: history op check)
//                          [--race-pct N]         (N % of the holds use a 150-400 ms TTL, so the watchdog
//                                                  renews every 50-130 ms, and are released at a random
//                                                  moment with no write; after an acknowledged release the
//                                                  lock row is inspected again: history op check)
//                          [--break cancel|race|multi|rw|fair|fair_stale]  (a deliberately broken worker, to show the checks
//                                                  can fail: cancel keeps a second, unlogged lease after a
//                                                  cancellation; race logs a release it never made;
//                                                  multi keeps parts of a set it failed to acquire;
//                                                  rw takes a read lease where it should write;
//                                                  fair acquires its fair names unfairly, skipping the queue;
//                                                  fair_stale: a fair holder ignores the loss of its lease,
//                                                  writes unfenced, logs a refused renew/release as ok)
//                          [--rw-pct N]           (N % of the iterations: a read or write lease on <prefix>_rw0..1)
//                          [--fair-pct N]         (N % of the iterations: a fair lease, lease_options::fair, on
//                                                  <prefix>_fair0; every acquirer of that name is fair; held,
//                                                  written, renewed, released like a plain hold, A line too)
//                          [--multi-pct N]        (N % of the iterations: try_acquire_all of 2-3 names)
//                          [--leader-pct N]       (N % of the iterations: half a leader_latch on the name for a
//                                                  while, half await_leadership in place of try_acquire_for)
//                          [--table-index K]      (lock table K of --tables: K >= 1 is <prefix>_lt<K>, the
//                                                  same names, logged <name>@<K>; setup, verify, dump and
//                                                  cleanup take --tables N to cover them all)
//                          [--threads N]          (N lock loops on one shared client, thread k >= 1 logging
//                                                  to <log>.t<k>; the P line's 6th field is k)
//                          [--permits N]          (N >= 2: each name is a counting semaphore of N permits;
//                                                  the worker takes one permit and logs every line with
//                                                  the name <name>#<slot>, its fenced write goes to the
//                                                  resource row of that slot; no nesting)
//   fault_worker inventory --url U --prefix P --strategy atomic|cas|rowlock --index I --log F
//   fault_worker verify    --url U --prefix P --names N --ttl MS --wait MS [--permits N] [--admin-url U]
//   fault_worker dump      --url U --prefix P --names N [--permits N]
//   fault_worker cleanup   --url U --prefix P --names N [--permits N]
//   fault_worker probe     --url U --prefix P --log F
//   fault_worker connect   --url U              one connect, no retry: exit 0 connected, 3 refused
//                                               (database_error/invalid_argument, e.g. a lazy durability setting), 1 other
//
// Every log line is tab-separated, written with one write(2) and fsync-free but unbuffered, so a
// SIGKILL loses at most the line being formed. Times are CLOCK_MONOTONIC microseconds (the driver
// runs skewed workers with FAKETIME_DONT_FAKE_MONOTONIC=1, so these stay comparable).
//
// The lock loop also writes the operation history the checker reads as a whole, one `O` line per
// event: O <t_us> <phase> <op> <name> <token> <detail>, phase invoke|ok|fail|unknown|lost, op
// acquire|inner_acquire|inner_release|renew|release|write (unknown: the statement may or may not
// have been applied, e.g. connection_lost; lost: the library told this process its lease is gone,
// op = the guard, outer|inner, detail = how: callback|renew|release). Phase `check`, op
// after_cancel|after_release: what inspect() showed of the name's lock row then, token = the row's
// token (0: no row), detail = holder=<label>,self=<this worker's label>,left_ms=<time left>. Only the library's public
// API of before and after the lease-engine rewrite is used, so the same source builds against both.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <tuple>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/permit_name.hpp"  // the library's own permit row names (compiled in: see CMakeLists.txt)
#include "sqllock/sqllock.hpp"

namespace {

using namespace std::chrono_literals;

std::atomic<bool> g_stop{false};

void on_term(int) { g_stop.store(true); }

long long now_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

struct args {
  std::map<std::string, std::string> v;
  std::string get(const std::string& k, const std::string& def = {}) const {
    auto it = v.find(k);
    return it == v.end() ? def : it->second;
  }
  long long num(const std::string& k, long long def) const {
    auto it = v.find(k);
    return it == v.end() ? def : std::stoll(it->second);
  }
};

// Per-process log: one write(2) per line, so lines are never torn or lost in a user-space buffer.
class line_log {
 public:
  explicit line_log(const std::string& path) {
    if (!path.empty()) fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  ~line_log() {
    if (fd_ >= 0) ::close(fd_);
  }
  template <class... T>
  void line(const T&... parts) {
    std::string s;
    bool first = true;
    ((s += (first ? "" : "\t"), s += to_text(parts), first = false), ...);
    for (auto& c : s) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    s += '\n';
    if (fd_ >= 0) {
      [[maybe_unused]] auto n = ::write(fd_, s.data(), s.size());
    }
  }

 private:
  static std::string to_text(const std::string& s) { return s; }
  static std::string to_text(const char* s) { return s; }
  template <class N>
  static std::string to_text(N n) requires std::is_arithmetic_v<N> { return std::to_string(n); }
  int fd_ = -1;
};

// The most specific sqllock error type, for logs and the checker.
std::string error_kind(const std::exception& e) {
  if (dynamic_cast<const sqllock::lease_lost*>(&e)) return "lease_lost";
  if (dynamic_cast<const sqllock::not_holder*>(&e)) return "not_holder";
  if (dynamic_cast<const sqllock::connection_lost*>(&e)) return "connection_lost";
  if (dynamic_cast<const sqllock::acquire_timeout*>(&e)) return "acquire_timeout";
  if (dynamic_cast<const sqllock::cancelled*>(&e)) return "cancelled";
  if (dynamic_cast<const sqllock::retries_exhausted*>(&e)) return "retries_exhausted";
  if (dynamic_cast<const sqllock::deadlock_detected*>(&e)) return "deadlock_detected";
  if (dynamic_cast<const sqllock::serialization_failure*>(&e)) return "serialization_failure";
  if (dynamic_cast<const sqllock::version_conflict*>(&e)) return "version_conflict";
  if (dynamic_cast<const sqllock::lock_not_available*>(&e)) return "lock_not_available";
  if (dynamic_cast<const sqllock::query_canceled*>(&e)) return "query_canceled";
  if (dynamic_cast<const sqllock::schema_missing*>(&e)) return "schema_missing";
  if (dynamic_cast<const sqllock::invalid_argument*>(&e)) return "invalid_argument";
  if (dynamic_cast<const sqllock::database_error*>(&e)) return "database_error";
  if (dynamic_cast<const sqllock::error*>(&e)) return "error";
  return "std_exception";
}

// What an error means for the history: `unknown` when the statement may have been applied (the
// answer never came), `fail` when it certainly was not.
const char* phase_of(const std::string& kind) {
  return kind == "connection_lost" || kind == "query_canceled" || kind == "database_error" || kind == "error" ||
                 kind == "std_exception"
             ? "unknown"
             : "fail";
}

std::string dialect_of(const std::string& url) {
  if (url.starts_with("sqlite:")) return "sqlite";
  if (url.starts_with("mysql:")) return "mysql";
  return "postgresql";
}

std::string lock_name(const std::string& prefix, int i) { return prefix + "_lock" + std::to_string(i); }
// Several lock tables on one server (--tables K, no permits): table 0 is the default sqllock_locks,
// table k >= 1 is <prefix>_lt<k>, with the same lock names; a name of table k is logged (and its
// fenced resource row named) <name>@<k>, so every check is per table and name.
std::string lock_table_name(const std::string& prefix, int k) {
  return k == 0 ? std::string("sqllock_locks") : prefix + "_lt" + std::to_string(k);
}
int table_count(const args& a) { return a.num("permits", 0) > 0 ? 1 : static_cast<int>(a.num("tables", 1)); }
int table_index_of(const std::string& logged) {
  auto at = logged.rfind('@');
  return at == std::string::npos ? 0 : std::stoi(logged.substr(at + 1));
}
std::string without_table(const std::string& logged) {
  auto at = logged.rfind('@');
  return at == std::string::npos ? logged : logged.substr(0, at);
}
std::string res_table(const std::string& prefix) { return prefix + "_res"; }
// With --permits: the name a permit is logged and written under (one "name" per slot for the checker).
std::string slot_name(const std::string& semaphore, int slot) { return semaphore + "#" + std::to_string(slot); }
// The names setup, verify, dump and cleanup cover: the lock names, or every slot of every semaphore.
std::vector<std::string> logged_names(const args& a) {
  std::vector<std::string> out;
  const int permits = static_cast<int>(a.num("permits", 0));
  for (int i = 0; i < a.num("names", 3); ++i) {
    for (int k = 0; permits == 0 && k < table_count(a); ++k) {
      out.push_back(lock_name(a.get("prefix"), i) + (k == 0 ? "" : "@" + std::to_string(k)));
    }
    for (int k = 0; k < permits; ++k) out.push_back(slot_name(lock_name(a.get("prefix"), i), k));
  }
  // The fair shape's name (--fair-pct, never with --permits), per table: a resource row for its
  // fenced writes, a lock row in the dump, verified (fairly) after the run.
  for (int k = 0; permits == 0 && k < table_count(a); ++k) {
    out.push_back(a.get("prefix") + "_fair0" + (k == 0 ? "" : "@" + std::to_string(k)));
  }
  // The reader-writer shape's names (--rw-pct), per table: a resource row for the writers' fenced
  // writes; verified by taking the write lock. (Their rows are derived: no LOCK line in the dump.)
  for (int i = 0; permits == 0 && i < 2; ++i) {
    for (int k = 0; k < table_count(a); ++k) {
      out.push_back(a.get("prefix") + "_rw" + std::to_string(i) + (k == 0 ? "" : "@" + std::to_string(k)));
    }
  }
  return out;
}
bool is_rw_name(const std::string& logged) {
  const std::string n = without_table(logged);
  const auto at = n.rfind("_rw");
  return at != std::string::npos && at + 4 == n.size() && (n.back() == '0' || n.back() == '1');
}
bool is_fair_name(const std::string& logged) {
  const std::string n = without_table(logged);
  return n.size() >= 6 && n.compare(n.size() - 6, 6, "_fair0") == 0;
}
// The lock-table row of a logged name: the lock name itself, or the permit row of <semaphore>#<slot>.
std::string lock_row_of(const std::string& logged_with_table) {
  const std::string logged = without_table(logged_with_table);
  auto hash = logged.rfind('#');
  if (hash == std::string::npos) return logged;
  return sqllock::detail::permit_row_name(logged.substr(0, hash), std::stoi(logged.substr(hash + 1)));
}
// The inverse, for on_lost (which receives the row name): a permit row (the library's decode_row_name)
// -> "<S>#<k>"; any other name unchanged.
std::string logged_name_of_row(const std::string& row) {
  const auto info = sqllock::decode_row_name(row);
  return info.what == sqllock::row_name_info::kind::permit ? slot_name(info.name, info.permit) : row;
}
std::string aw_table(const std::string& prefix) { return prefix + "_aw"; }
std::string stock_table(const std::string& prefix, const std::string& s) { return prefix + "_stock_" + s; }
std::string sales_table(const std::string& prefix, const std::string& s) { return prefix + "_sales_" + s; }
const std::vector<std::string> strategies = {"atomic", "cas", "rowlock"};

// The lease events of the calling thread, while it is inside a multi-lock call (run_multi): a
// multi-lock takes names one by one and gives them back when the rest of its set is not acquired
// (or a lease of it was lost meanwhile), holds the application never sees but the history must.
// Events come on the thread that caused them (events.hpp); a watchdog's events are not tapped.
struct tapped_event {
  long long t;
  sqllock::event_kind kind;
  std::string name;
  std::int64_t token;
};
thread_local std::vector<tapped_event>* t_event_tap = nullptr;
// Losses reported by any thread (the watchdog, the deadline thread), by lock table, name and token:
// a multi-lock's partial hold that was lost during the call is given back by nobody, and its
// critical section ends at this report (the caller's tap sees only its own thread's events).
std::mutex g_lost_mu;
std::map<std::tuple<std::string, std::string, std::int64_t>, long long> g_lost_at;
std::optional<long long> lost_at(const std::string& table, const std::string& name, std::int64_t token) {
  std::lock_guard lk(g_lost_mu);
  const auto it = g_lost_at.find({table, name, token});
  if (it == g_lost_at.end()) return std::nullopt;
  return it->second;
}

// Connect, retrying while the database is unreachable (restarts), until stopped.
std::optional<sqllock::client> connect_retry(const std::string& url, line_log* log, bool require_schema = true,
                                             const std::string& holder_label = {}, const std::string& table = {}) {
  sqllock::client_options o;
  if (!table.empty()) o.table = table;
  o.require_schema = require_schema;
  o.holder_id = holder_label;  // a label several workers may share (--holder); empty: the default
  o.on_event = [table](const sqllock::lease_event& e) {
    if (e.kind == sqllock::event_kind::lost && e.permit < 0) {
      std::lock_guard lk(g_lost_mu);
      g_lost_at.try_emplace({table, std::string(e.name), e.fencing_token}, now_us());
    }
    // lost and statement_error on the caller's thread: a give-back's release that failed (its
    // owner check, or its answer) during the call.
    if (t_event_tap && e.permit < 0 &&
        (e.kind == sqllock::event_kind::acquired || e.kind == sqllock::event_kind::released ||
         e.kind == sqllock::event_kind::lost || e.kind == sqllock::event_kind::statement_error)) {
      t_event_tap->push_back({now_us(), e.kind, std::string(e.name), e.fencing_token});
    }
  };
  for (int attempt = 0; !g_stop.load(); ++attempt) {
    try {
      return sqllock::connect(url, o);
    } catch (const std::exception& e) {
      if (log) log->line("E", "connect", error_kind(e), now_us(), e.what());
      if (attempt > 600) throw;
      std::this_thread::sleep_for(100ms);
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- setup, dump, cleanup, verify

int run_setup(const args& a) {
  auto url = a.get("url");
  auto prefix = a.get("prefix");
  auto d = dialect_of(url);
  auto c = connect_retry(url, nullptr, false);
  c->migrate();
  for (int k = 1; k < table_count(a); ++k) connect_retry(url, nullptr, false, {}, lock_table_name(prefix, k))->migrate();
  std::string seq = d == "postgresql" ? "seq BIGSERIAL PRIMARY KEY"
                    : d == "mysql"    ? "seq BIGINT AUTO_INCREMENT PRIMARY KEY"
                                      : "seq INTEGER PRIMARY KEY AUTOINCREMENT";
  std::string engine = d == "mysql" ? " ENGINE=InnoDB" : "";
  {
    auto tx = c->begin();
    tx.execute("CREATE TABLE " + res_table(prefix) +
               " (res_id VARCHAR(255) PRIMARY KEY, val BIGINT NOT NULL, token BIGINT NOT NULL, writer VARCHAR(255))" +
               engine);
    tx.execute("CREATE TABLE " + aw_table(prefix) + " (" + seq +
               ", res_id VARCHAR(255) NOT NULL, token BIGINT NOT NULL, holder VARCHAR(255) NOT NULL,"
               " val BIGINT NOT NULL)" + engine);
    for (const auto& s : strategies) {
      tx.execute("CREATE TABLE " + stock_table(prefix, s) +
                 " (sku VARCHAR(64) PRIMARY KEY, qty BIGINT NOT NULL, version BIGINT NOT NULL)" + engine);
      tx.execute("CREATE TABLE " + sales_table(prefix, s) + " (" + seq +
                 ", worker BIGINT NOT NULL, n BIGINT NOT NULL)" + engine);
    }
    tx.commit();
  }
  auto tx = c->begin();
  for (const auto& name : logged_names(a)) {
    tx.execute("INSERT INTO " + res_table(prefix) + " (res_id, val, token, writer) VALUES (?, 0, 0, NULL)", {name});
  }
  for (const auto& s : strategies) {
    tx.execute("INSERT INTO " + stock_table(prefix, s) + " (sku, qty, version) VALUES ('sku', ?, 1)",
               {static_cast<std::int64_t>(a.num("stock", 10000))});
  }
  tx.commit();
  return 0;
}

std::string col(const sqllock::result_row& r, std::size_t i) { return r[i] ? *r[i] : std::string("\\N"); }

int run_dump(const args& a) {
  auto url = a.get("url");
  auto prefix = a.get("prefix");
  auto c = connect_retry(url, nullptr);
  auto tx = c->begin();
  for (const auto& r : tx.query("SELECT res_id, val, token, writer FROM " + res_table(prefix))) {
    std::cout << "RES\t" << col(r, 0) << '\t' << col(r, 1) << '\t' << col(r, 2) << '\t' << col(r, 3) << '\n';
  }
  for (const auto& r : tx.query("SELECT seq, res_id, token, holder, val FROM " + aw_table(prefix) + " ORDER BY seq")) {
    std::cout << "AW\t" << col(r, 0) << '\t' << col(r, 1) << '\t' << col(r, 2) << '\t' << col(r, 3) << '\t'
              << col(r, 4) << '\n';
  }
  for (const auto& name : logged_names(a)) {  // printed under the logged name (<semaphore>#<slot>)
    auto rows = tx.query("SELECT token, holder_id FROM " + lock_table_name(prefix, table_index_of(name)) +
                             " WHERE name = ?",
                         {lock_row_of(name)});
    for (const auto& r : rows) std::cout << "LOCK\t" << name << '\t' << col(r, 0) << '\t' << col(r, 1) << '\n';
  }
  for (const auto& s : strategies) {
    for (const auto& r : tx.query("SELECT qty FROM " + stock_table(prefix, s))) {
      std::cout << "STOCK\t" << s << '\t' << col(r, 0) << '\n';
    }
    for (const auto& r : tx.query("SELECT worker, n FROM " + sales_table(prefix, s) + " ORDER BY seq")) {
      std::cout << "SALE\t" << s << '\t' << col(r, 0) << '\t' << col(r, 1) << '\n';
    }
  }
  if (dialect_of(url) == "sqlite") {
    for (const auto& r : tx.query("PRAGMA integrity_check")) std::cout << "INTEGRITY\t" << col(r, 0) << '\n';
  }
  tx.commit();
  std::cout.flush();
  return 0;
}

int run_cleanup(const args& a) {
  auto url = a.get("url");
  auto prefix = a.get("prefix");
  auto c = connect_retry(url, nullptr);
  auto tx = c->begin();
  tx.execute("DROP TABLE " + res_table(prefix));
  tx.execute("DROP TABLE " + aw_table(prefix));
  for (const auto& s : strategies) {
    tx.execute("DROP TABLE " + stock_table(prefix, s));
    tx.execute("DROP TABLE " + sales_table(prefix, s));
  }
  tx.commit();
  auto tx2 = c->begin();
  for (const auto& name : logged_names(a)) {
    tx2.execute("DELETE FROM " + lock_table_name(prefix, table_index_of(name)) + " WHERE name = ?", {lock_row_of(name)});
  }
  if (a.num("permits", 0) > 0) {
    for (int i = 0; i < a.num("names", 3); ++i) {
      tx2.execute("DELETE FROM sqllock_locks_semaphores WHERE name = ?", {lock_name(a.get("prefix"), i)});
    }
  }
  tx2.execute("DELETE FROM sqllock_locks WHERE name = ?", {a.get("prefix") + "_probe"});
  // The fair shape's name (--fair-pct): its row and any ticket left in the queue (tables k >= 1 go below).
  tx2.execute("DELETE FROM sqllock_locks WHERE name = ?", {a.get("prefix") + "_fair0"});
  tx2.execute("DELETE FROM sqllock_locks_queue WHERE name = ?", {a.get("prefix") + "_fair0"});
  tx2.commit();
  // --tables: the run's own lock tables go, with the companions migrate() made for them.
  for (int k = 1; k < table_count(a); ++k) {
    auto tx3 = c->begin();
    const auto t = lock_table_name(prefix, k);
    for (const char* suffix : {"_semaphores", "_queue", "_schema", "_rebuild", ""}) tx3.execute("DROP TABLE IF EXISTS " + t + suffix);
    tx3.commit();
  }
  return 0;
}

// A name verify could not get: every held row of it (its reader-writer rows too), live or not, with
// its raw expiry ("D\t<logged name>\theld\t<row>\t<holder>\t<token>\texpires <time>"; a row held
// but neither live nor expired, as a NULL expiry was on MariaDB, shows too), then the server's open
// transactions: when no row is held, a transaction that outlived its client may hold a row lock.
void print_stuck_rows(sqllock::client& c, const std::string& logged, const std::string& name,
                      const std::string& table, const std::string& dialect, const std::string& admin_url) {
  try {
    {
      int n = 0;
      auto tx = c.begin();
      for (const auto& r : tx.query("SELECT name, holder_id, token, expires_at FROM " + table +
                                        " WHERE holder_id IS NOT NULL AND (name = ? OR name LIKE ?)",
                                    {name, "sqllock.rwlock.%." + name + ".%"})) {
        const auto row = col(r, 0);
        std::cout << "D\t" << logged << "\theld\t" << row.substr(0, row.find_last_not_of('.') + 1) << '\t' << col(r, 1) << '\t'
                  << col(r, 2) << "\texpires " << col(r, 3) << '\n';
        ++n;
      }
      tx.commit();
      if (n == 0) std::cout << "D\t" << logged << "\tno held row\n";
    }
    // The open transactions of other sessions: one that outlived its client holds row locks.
    const char* q = dialect == "mysql"
                        ? "SELECT trx_mysql_thread_id, trx_state, TIMESTAMPDIFF(MICROSECOND, trx_started, NOW(6)) DIV "
                          "1000, trx_rows_locked, COALESCE(trx_query, '') FROM information_schema.innodb_trx"
                    : dialect == "postgresql"
                        ? "SELECT pid, state, (EXTRACT(EPOCH FROM clock_timestamp() - xact_start) * 1000)::bigint, "
                          "wait_event_type, COALESCE(query, '') FROM pg_stat_activity WHERE xact_start IS NOT NULL "
                          "AND pid <> pg_backend_pid()"
                        : nullptr;
    if (q) {  // with the admin URL where given (MariaDB shows other sessions' transactions to PROCESS)
      // One try (no retries: an unreachable admin URL must not hold verify up).
      std::optional<sqllock::client> admin;
      if (!admin_url.empty()) admin = sqllock::connect(admin_url);
      auto tx = (admin ? *admin : c).begin();
      for (const auto& r : tx.query(q)) {
        std::cout << "D\t" << logged << "\ttransaction";
        for (std::size_t i = 0; i < 5; ++i) {
          auto v = col(r, i).substr(0, 160);
          std::replace(v.begin(), v.end(), '\n', ' ');  // one line per transaction
          std::cout << '\t' << v;
        }
        std::cout << '\n';
      }
      tx.commit();
    }
  } catch (const std::exception& e) {
    std::cout << "D\t" << logged << "\tdiagnostics failed: " << error_kind(e) << ": " << e.what() << '\n';
  }
}

// After the run: a fresh process must get every name within ttl + wait (no stuck lock).
int run_verify(const args& a) {
  auto c = connect_retry(a.get("url"), nullptr);
  auto bound = std::chrono::milliseconds(a.num("ttl", 2000) + a.num("wait", 3000));
  int bad = 0;
  const int permits = static_cast<int>(a.num("permits", 0));
  if (permits > 0) {
    // Every permit of every semaphore, held together: each slot must come free within the bound and
    // give a token above every earlier one of that slot (the driver compares per <name>#<slot>).
    for (int i = 0; i < a.num("names", 3); ++i) {
      auto sem = lock_name(a.get("prefix"), i);
      std::vector<sqllock::lease_guard> held;
      for (int k = 0; k < permits; ++k) {
        auto t0 = now_us();
        try {
          sqllock::lease_options lo;
          lo.ttl = 5s;
          auto g = c->try_acquire_permit_for(sem, permits, bound, lo);
          if (!g) {
            std::cout << "V\t" << sem << "#?\t0\tstuck\t" << (now_us() - t0) / 1000 << '\n';
            ++bad;
            break;
          }
          std::cout << "V\t" << slot_name(sem, g->permit()) << '\t' << g->fencing_token() << "\tok\t"
                    << (now_us() - t0) / 1000 << '\n';
          held.push_back(std::move(*g));
        } catch (const std::exception& e) {
          std::cout << "V\t" << sem << "#?\t0\terror:" << error_kind(e) << '\t' << (now_us() - t0) / 1000 << '\n';
          ++bad;
          break;
        }
      }
      for (auto& g : held) g.release();
    }
    return bad == 0 ? 0 : 1;
  }
  std::vector<std::optional<sqllock::client>> per_table;  // table k >= 1: a client of its own
  for (int k = 1; k < table_count(a); ++k) {
    per_table.push_back(connect_retry(a.get("url"), nullptr, true, {}, lock_table_name(a.get("prefix"), k)));
  }
  for (const auto& logged : logged_names(a)) {
    const int k = table_index_of(logged);
    auto& tc = k == 0 ? c : per_table.at(static_cast<std::size_t>(k - 1));
    auto name = logged;  // printed as logged (<name>@<k>)
    auto t0 = now_us();
    std::optional<sqllock::lease_guard> g;
    try {
      sqllock::lease_options lo;
      lo.ttl = 5s;
      lo.fair = is_fair_name(logged);  // every acquirer of a fair name is fair (client.hpp)
      g = is_rw_name(logged) ? tc->try_acquire_write_for(without_table(logged), bound, lo)
                             : tc->try_acquire_for(without_table(logged), bound, lo);
    } catch (const std::exception& e) {
      std::cout << "V\t" << name << "\t0\terror:" << error_kind(e) << '\t' << (now_us() - t0) / 1000 << '\n';
      ++bad;
      continue;
    }
    std::cout << "V\t" << name << '\t' << (g ? g->fencing_token() : 0) << '\t' << (g ? "ok" : "stuck") << '\t'
              << (now_us() - t0) / 1000 << '\n';
    if (!g) {
      ++bad;
      print_stuck_rows(*tc, logged, without_table(logged), lock_table_name(a.get("prefix"), k), dialect_of(a.get("url")),
                       a.get("admin-url"));
    }
    if (g) g->release();
  }
  return bad == 0 ? 0 : 1;
}

// ---------------------------------------------------------------- the lock loop

// One lock loop: the whole process (--threads 1, its own client) or one of its threads sharing
// `shared` (--threads N: thread k logs to <log>.t<k> for k >= 1, its holder string ends .t<k>).
int lock_loop(const args& a, int thread_k, sqllock::client* shared);

int run_lock(const args& a) {
  const int threads = static_cast<int>(std::clamp(a.num("threads", 1), 1LL, 64LL));
  if (threads == 1) return lock_loop(a, 0, nullptr);
  // 1 to 16 threads per client process: one client, shared; the default holder_scope::per_thread
  // makes its threads exclude each other, so each thread is a worker of its own for the checker.
  line_log log(a.get("log"));
  const int table_k = static_cast<int>(a.num("table-index", 0));
  auto c = connect_retry(a.get("url"), &log, true, a.get("holder"),
                         table_k ? lock_table_name(a.get("prefix"), table_k) : std::string());
  if (!c) return 0;
  std::vector<std::thread> ts;
  for (int k = 0; k < threads; ++k) ts.emplace_back([&a, k, &c] { lock_loop(a, k, &*c); });
  for (auto& t : ts) t.join();
  return 0;
}

int lock_loop(const args& a, int thread_k, sqllock::client* shared) {
  auto url = a.get("url");
  auto prefix = a.get("prefix");
  int names = static_cast<int>(a.num("names", 3));
  const long long ttl_min = a.num("ttl", 2000);
  const long long ttl_max = std::max(ttl_min, a.num("ttl-max", ttl_min));
  auto wait = std::chrono::milliseconds(a.num("wait", 3000));
  long long index = a.num("index", 0);
  int slow_pct = static_cast<int>(a.num("slow-tx-pct", 10));
  // --permits N: each name is a semaphore of N permits; one permit per acquisition, logged as <name>#<slot>.
  const int permits = static_cast<int>(a.num("permits", 0));
  int nest_pct = permits > 0 ? 0 : static_cast<int>(a.num("nest-pct", 0));  // a permit is never re-entered
  const int guard_pct = static_cast<int>(a.num("guard-pct", 0));
  const std::string nest_ttl = a.get("nest-ttl", "both");  // the inner TTL: shorter|longer|both
  const int cancel_pct = permits > 0 ? 0 : static_cast<int>(a.num("cancel-pct", 0));
  const int race_pct = permits > 0 ? 0 : static_cast<int>(a.num("race-pct", 0));
  const std::string broken = a.get("break");
  const int multi_pct = permits > 0 ? 0 : static_cast<int>(a.num("multi-pct", 0));
  const int leader_pct = permits > 0 ? 0 : static_cast<int>(a.num("leader-pct", 0));
  const int rw_pct = permits > 0 ? 0 : static_cast<int>(a.num("rw-pct", 0));
  const int fair_pct = permits > 0 ? 0 : static_cast<int>(a.num("fair-pct", 0));
  const std::string label = a.get("holder");
  // The application's own writes follow the server's durability default; a run that makes it lazy
  // (the driver's --server-durability lazy) asks the worker to commit its writes durably, as a careful
  // application would, so that a lost write after a crash is sqllock's doing and not the test's.
  const bool durable_writes = a.num("durable-writes", 0) != 0;
  line_log log(thread_k == 0 ? a.get("log") : a.get("log") + ".t" + std::to_string(thread_k));
  std::mt19937_64 rng(std::random_device{}() ^ static_cast<std::uint64_t>(index) * 7919 ^
                      static_cast<std::uint64_t>(thread_k) * 104729);
  auto pick = [&](long long lo, long long hi) { return std::uniform_int_distribution<long long>(lo, hi)(rng); };

  log.line("P", getpid(), now_us(), index, label, thread_k);
  // --table-index k: this worker's client uses lock table k; its names are logged <name>@<k>.
  const int table_k = static_cast<int>(a.num("table-index", 0));
  const std::string table = table_k ? lock_table_name(prefix, table_k) : std::string();
  const std::string sfx = table_k ? "@" + std::to_string(table_k) : std::string();
  std::optional<sqllock::client> own;
  if (!shared) own = connect_retry(url, &log, true, label, table);
  sqllock::client* c = shared ? shared : (own ? &*own : nullptr);
  if (!c) return 0;
  const std::string thread_tag = shared ? ".t" + std::to_string(thread_k) : "";
  const std::string update = "UPDATE " + res_table(prefix) +
                             " SET val = ?, token = ?, writer = ? WHERE res_id = ? AND token <= ?";
  // A guarded write carries no fence condition: the guard alone must keep a stale holder out
  // (the resource's applied tokens must still increase in commit order).
  const std::string update_guarded =
      "UPDATE " + res_table(prefix) + " SET val = ?, token = ?, writer = ? WHERE res_id = ?";
  const std::string insert = "INSERT INTO " + aw_table(prefix) + " (res_id, token, holder, val) VALUES (?, ?, ?, ?)";
  int consecutive_errors = 0;
  std::int64_t seq = 0;
  long long first_error_us = 0;
  auto failed = [&](const std::string& where, const std::exception& e) {
    log.line("E", where, error_kind(e), now_us(), e.what());
    if (consecutive_errors++ == 0) first_error_us = now_us();
    // The library reconnects by itself; a new client only when errors persist for 15 s (never
    // for a client its threads share).
    if (!shared && consecutive_errors >= 5 && now_us() - first_error_us > 15'000'000) {
      log.line("C", now_us());  // recreate the client
      own.reset();
      own = connect_retry(url, &log, true, label, table);
      c = own ? &*own : nullptr;
      consecutive_errors = 0;
    }
    std::this_thread::sleep_for(100ms);
  };
  // The history: one O line per event (see the top of this file).
  auto op = [&log, &sfx](const char* phase, const char* what, const std::string& name, std::int64_t token,
                         const std::string& detail) { log.line("O", now_us(), phase, what, name + sfx, token, detail); };
  // on_lost gets the lock-row name: for a permit, its row name, logged as <semaphore>#<slot>.
  auto on_lost_of = [&log, &sfx](const char* which) {
    return [&log, &sfx, which](const std::string& n, std::int64_t tok) {
      log.line("O", now_us(), "lost", which, logged_name_of_row(n) + sfx, tok, "callback");
    };
  };

  // What inspect() shows of `name` now, as a history `check` record.
  auto inspect_op = [&](const char* what, const std::string& name) {
    try {
      auto info = c->inspect(name);
      op("check", what, name, info ? info->fencing_token : 0,
         "holder=" + (info ? info->holder : std::string()) + ",self=" + c->holder_id() +
             ",left_ms=" + std::to_string(info ? info->time_left.count() : 0));
    } catch (const std::exception& e) {
      op("check", what, name, -1, "error=" + error_kind(e));
    }
  };
  std::vector<sqllock::lease_guard> broken_kept;  // --break cancel: leases the history never hears of

  // Multi-lock (--multi-pct): try_acquire_all of 2 or 3 names, all or nothing. Each lease is logged
  // as an acquisition of its own (A line and history), so every per-name check covers it; the set
  // is released at once. A set not acquired leaves nothing behind: each name is inspected after.
  auto run_multi = [&] {
    std::vector<std::string> set;
    for (int i = 0; i < names && set.size() < 3; ++i) {
      if (pick(0, 1) == 0 || names - i <= 2 - static_cast<int>(set.size())) set.push_back(lock_name(prefix, i));
    }
    std::sort(set.begin(), set.end());
    const long long ttl_ms = pick(ttl_min, ttl_max);
    std::string joined;
    for (const auto& n : set) joined += (joined.empty() ? "" : "+") + n;
    for (const auto& n : set) op("invoke", "acquire", n, 0, "ttl=" + std::to_string(ttl_ms) + ",multi=" + joined);
    const auto t_req = now_us();
    std::optional<sqllock::multi_lease_guard> mg;
    sqllock::lease_options lo;
    lo.ttl = std::chrono::milliseconds(ttl_ms);
    lo.on_lost = on_lost_of("outer");
    std::string failure;
    bool timed_out_waiting = false;  // the set's last name timed out (not: a lease of it was lost)
    std::vector<tapped_event> tapped;
    t_event_tap = &tapped;
    try {
      mg = sqllock::acquire_all(*c, set, wait, lo);
    } catch (const sqllock::acquire_timeout& e) {
      failure = "timeout";
      timed_out_waiting = std::string(e.what()).find("was lost while") == std::string::npos;
    } catch (const std::exception& e) {
      failure = error_kind(e);
      log.line("E", "acquire", failure, now_us(), e.what());
    }
    t_event_tap = nullptr;
    // Partial holds: every lease the call took and gave back (all of them when the set was not
    // acquired; those of an earlier try when a lost lease made it try again). Each is logged as a
    // critical section of its own: ok acquire at its grant (the event follows the commit), and
    // the give-back's invoke at the latest time it certainly still held the name: the last grant
    // of the call before the give-back, or the set's deadline when the last name timed out
    // (acquire_all gives back only after that wait returned); then the give-back's outcome: ok
    // release at the released event, or, when the release failed on this thread, fail (its owner
    // check: lost) or unknown (no answer: re-sent in the background) at that event. A lease lost
    // during the call before any give-back (reported by the deadline thread or the watchdog, which
    // this thread's tap does not see) ends at that report.
    {
      std::vector<std::pair<std::string, std::int64_t>> kept;
      if (mg) {
        const auto toks = mg->fencing_tokens();
        const auto nms = mg->names();
        for (std::size_t i = 0; i < nms.size(); ++i) kept.emplace_back(nms[i], toks[i]);
      }
      const auto is_acquired = [](const tapped_event& x) { return x.kind == sqllock::event_kind::acquired; };
      long long last_grant = 0;
      for (std::size_t i = 0; i < tapped.size(); ++i) {
        const auto& e = tapped[i];
        const bool in_set = std::find(kept.begin(), kept.end(), std::make_pair(e.name, e.token)) != kept.end();
        if (in_set) {
          if (is_acquired(e)) last_grant = e.t;
          continue;
        }
        if (is_acquired(e)) {
          last_grant = e.t;
          log.line("O", e.t, "ok", "acquire", e.name + sfx, e.token, "multi_partial");
          const bool given_back = std::any_of(tapped.begin() + static_cast<std::ptrdiff_t>(i) + 1, tapped.end(), [&](const tapped_event& x) {
            return !is_acquired(x) && x.name == e.name && x.token == e.token;
          });
          if (!given_back) {
            if (const auto t = lost_at(table, e.name, e.token)) log.line("O", *t, "lost", "outer", e.name + sfx, e.token, "multi_partial");
          }
          continue;
        }
        // The give-back's outcome (released, or the release's failure): its invoke comes first.
        // Other failures (an acquire's statement_error names no token) are no give-back.
        const bool of_a_hold = std::any_of(tapped.begin(), tapped.begin() + static_cast<std::ptrdiff_t>(i), [&](const tapped_event& x) {
          return is_acquired(x) && x.name == e.name && x.token == e.token;
        });
        if (!of_a_hold) continue;
        const bool final_rollback = std::none_of(tapped.begin() + static_cast<std::ptrdiff_t>(i), tapped.end(), is_acquired);
        long long held_until = last_grant;
        if (!mg && timed_out_waiting && final_rollback) held_until = std::max(held_until, std::min(e.t, t_req + static_cast<long long>(wait.count()) * 1000));
        log.line("O", held_until, "invoke", "release", e.name + sfx, e.token, "multi_partial");
        const char* outcome = e.kind == sqllock::event_kind::released ? "ok"
                              : e.kind == sqllock::event_kind::lost   ? "fail"
                                                                      : "unknown";
        log.line("O", e.t, outcome, "release", e.name + sfx, e.token, "multi_partial");
        // One outcome per give-back: a release whose owner check failed emits lost, and may have
        // emitted statement_error for an earlier try; the first is logged.
        tapped.erase(std::remove_if(tapped.begin() + static_cast<std::ptrdiff_t>(i) + 1, tapped.end(),
                                    [&](const tapped_event& x) { return !is_acquired(x) && x.name == e.name && x.token == e.token; }),
                     tapped.end());
      }
    }
    if (!mg) {
      for (const auto& n : set) op(failure == "timeout" ? "fail" : phase_of(failure), "acquire", n, 0, failure);
      if (broken == "multi" && failure == "timeout") {  // broken: keeps what it got of the set
        for (const auto& n : set) {
          try {
            if (auto part = c->try_acquire_for(n, 1500ms, lo)) broken_kept.push_back(std::move(*part));
          } catch (const std::exception&) {
          }
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(pick(20, 150)));
      for (const auto& n : set) inspect_op("after_multi_fail", n);
      if (broken_kept.size() > 4) broken_kept.erase(broken_kept.begin());
      return;
    }
    consecutive_errors = 0;
    for (std::size_t i = 0; i < mg->size(); ++i) {
      const auto& l = (*mg)[i];
      op("ok", "acquire", l.name(), l.fencing_token(), "multi");
      log.line("A", l.name() + sfx, l.fencing_token(), l.holder_id() + "#" + std::to_string(getpid()) + thread_tag, t_req,
               now_us());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(pick(5, ttl_ms / 2)));
    for (std::size_t i = 0; i < mg->size(); ++i) {
      if ((*mg)[i].lost()) op("lost", "outer", (*mg)[i].name(), (*mg)[i].fencing_token(), "flag");
    }
    const auto got = set;
    std::vector<std::int64_t> tokens = mg->fencing_tokens();
    for (std::size_t i = 0; i < got.size(); ++i) op("invoke", "release", got[i], tokens[i], "multi");
    std::string result = "ok";
    try {
      mg->release();
    } catch (const std::exception& e) {
      result = error_kind(e);
    }
    // release() releases every lease and rethrows the first error: which one is not known, so an
    // error is logged for every name (fail for an owner check, unknown otherwise).
    for (std::size_t i = 0; i < got.size(); ++i) {
      op(result == "ok" ? "ok" : (result == "lease_lost" || result == "not_holder") ? "fail" : "unknown", "release",
         got[i], tokens[i], result == "ok" ? "multi" : result);
    }
  };

  // Leader election (--leader-pct, half of it): a leader_latch on `name` for a while, then closed.
  // Each term is logged as an acquisition (on_elected: ok acquire with the term's token, and an A
  // line); on_revoked ends it (lost: a loss report; closed: the release's invoke), so the per-name
  // checks see "no two leaders at once" and the term tokens like any other holds.
  auto run_latch = [&](const std::string& name) {
    const long long ttl_ms = pick(ttl_min, ttl_max);
    std::mutex mu;
    long long t_inv = now_us();
    std::int64_t term = 0;
    bool leading = false;
    bool closed_leading = false;
    op("invoke", "acquire", name, 0, "ttl=" + std::to_string(ttl_ms) + ",latch");
    sqllock::leader_latch_options lo;
    lo.lease.ttl = std::chrono::milliseconds(ttl_ms);
    lo.retry_delay = 200ms;
    const std::string holder = c->holder_id() + "#" + std::to_string(getpid()) + thread_tag;
    lo.on_elected = [&](std::int64_t tok) {
      std::lock_guard lk(mu);
      term = tok;
      leading = true;
      op("ok", "acquire", name, tok, "latch");
      log.line("A", name + sfx, tok, holder, t_inv, now_us());
    };
    lo.on_revoked = [&](std::int64_t tok, sqllock::leadership_end why) {
      std::lock_guard lk(mu);
      leading = false;
      if (why == sqllock::leadership_end::lost) {
        op("lost", "outer", name, tok, "revoked");
        t_inv = now_us();
        op("invoke", "acquire", name, 0, "ttl=" + std::to_string(ttl_ms) + ",latch");
      } else {
        closed_leading = true;
        op("invoke", "release", name, tok, "latch");
      }
    };
    {
      sqllock::leader_latch latch(*c, name, lo);
      std::this_thread::sleep_for(std::chrono::milliseconds(pick(ttl_ms / 2, ttl_ms * 2)));
      latch.close();
    }
    std::lock_guard lk(mu);
    if (closed_leading) {
      // close() never throws: a release whose answer was lost is only re-sent in the background, so
      // its return is no acknowledgment (not an `ok`, which crash_after_ack would take at its word).
      op("unknown", "release", name, term, "latch");
    } else {
      op("fail", "acquire", name, 0, "latch_closed");  // closed while not leading
    }
  };

  // One hold of the reader-writer shape, its invoke already logged: `attempt()` tries the
  // acquisition (an empty guard: timed out); its outcome is logged with detail `shape`, the lease is
  // held for pick(hold_lo, hold_hi) ms (picked after the acquisition), then released, and that is
  // logged too.
  auto hold_once = [&](const std::string& name, const char* shape, long long hold_lo, long long hold_hi,
                       auto&& attempt) {
    std::optional<sqllock::lease_guard> g;
    std::string failure;
    try {
      g = attempt();
      if (!g) failure = "timeout";
    } catch (const std::exception& e) {
      failure = error_kind(e);
      log.line("E", "acquire", failure, now_us(), e.what());
    }
    if (!g) {
      op(failure == "timeout" ? "fail" : phase_of(failure), "acquire", name, 0, failure);
      return;
    }
    consecutive_errors = 0;
    op("ok", "acquire", name, g->fencing_token(), shape);
    std::this_thread::sleep_for(std::chrono::milliseconds(pick(hold_lo, hold_hi)));
    if (g->lost()) op("lost", "outer", name, g->fencing_token(), "flag");
    const auto token = g->fencing_token();
    op("invoke", "release", name, token, shape);
    std::string result = "ok";
    try {
      g->release();
    } catch (const std::exception& e) {
      result = error_kind(e);
    }
    op(result == "ok" ? "ok" : (result == "lease_lost" || result == "not_holder") ? "fail" : "unknown", "release",
       name, token, result == "ok" ? shape : result);
  };

  // Reader-writer leases (--rw-pct): names <prefix>_rw0..1, used only this way (a name is either
  // a plain lock or a reader-writer lease); half the holds read, half write. Logged as
  // acquisitions with detail read|write; check_history.py lets readers overlap each other, never a
  // writer. A read hold is this one (no A line: readers share the name, which the driver's A-line
  // checks do not model); a write hold is an ordinary hold of the main loop (A line, fenced write,
  // renew, release), see there. --break rw: the writer takes a read lease instead (a worker that
  // skips the write lock), to show that check can fail.
  auto run_read = [&](const std::string& name) {
    const char* mode = "read";
    const long long ttl_ms = pick(ttl_min, ttl_max);
    sqllock::lease_options lo;
    lo.ttl = std::chrono::milliseconds(ttl_ms);
    // on_lost gets the derived row's name (sqllock.rwlock.<len>.<name>.writer...): logged under the
    // lease's own name, so the checker sees the loss of this hold.
    lo.on_lost = [&log, &sfx, name](const std::string&, std::int64_t tok) {
      log.line("O", now_us(), "lost", "outer", name + sfx, tok, "callback");
    };
    op("invoke", "acquire", name, 0, "ttl=" + std::to_string(ttl_ms) + "," + mode);
    hold_once(name, mode, 5, std::max(6LL, ttl_ms / 2), [&] { return c->try_acquire_read_for(name, wait, lo); });
  };

  while (!g_stop.load() && c) {
    // With --permits, `name` is the semaphore until the acquisition, then <semaphore>#<slot>.
    auto name = lock_name(prefix, static_cast<int>(pick(0, names - 1)));
    // Releases racing renewals: a short TTL (the watchdog renews every third of it), released at a
    // random moment, no write; then the row must not show this lease again.
    const bool race = pick(0, 99) < race_pct;
    // Cancellation of a waiter: acquire_for with a stop token requested at a random moment.
    const bool cancel = !race && pick(0, 99) < cancel_pct;
    const long long shape = race || cancel ? 100 : pick(0, 99);
    if (shape < multi_pct) {
      run_multi();
      continue;
    }
    // Reader-writer leases (--rw-pct): half read (run_read above), half write: an ordinary hold
    // below with try_acquire_write_for, detail `write` (check_history's reader-writer rules), no
    // nesting, held 5 ms to half the TTL, a timeout logged with no N line (a writer may wait behind
    // readers, which log no A line, so the driver's stuck-after-kill check cannot judge it).
    const bool rw_write = shape >= 100 - rw_pct && !race && !cancel && pick(0, 1) == 0;
    if (shape >= 100 - rw_pct && !race && !cancel && !rw_write) {
      run_read(prefix + "_rw" + std::to_string(pick(0, 1)));
      continue;
    }
    if (rw_write) name = prefix + "_rw" + std::to_string(pick(0, 1));
    // Fair leases (--fair-pct): the name <prefix>_fair0, used only this way and only fair (client.hpp:
    // a plain acquirer can starve fair waiters, so every acquirer of a fair name is fair). The lock
    // goes to the lowest live ticket of the name's queue; a release hands it to the next ticket.
    // A fair hold is an ordinary hold below (A line, fenced or guarded write, renew, release: a
    // target of the driver's holder faults and its stopped/killed-holder checks) with three
    // differences: the invoke also carries `fair`, the wait bound and the ticket TTL (the library's
    // default, 2 s) for check_history.py's ticket-order check; no nesting (a re-entry is not a
    // queue operation); a hold of 50-1000 ms, long enough for a queue to form behind it.
    // --break fair: the acquisitions are plain (unfair) while logged as fair, a queue nobody keeps.
    // --break fair_stale: a fair holder that ignores the loss of its lease: its write carries no
    // fence and no guard, its loss reports are dropped, a refused renew or release is logged ok.
    const bool fair = !rw_write && shape >= 100 - rw_pct - fair_pct && !race && !cancel;
    const bool stale = fair && broken == "fair_stale";
    if (fair) name = prefix + "_fair0";
    const bool special = fair || rw_write;  // no latch, no await_leadership, no nesting
    if (!special && !shared && shape < multi_pct + leader_pct / 2) {  // latches: one per client (leader.hpp)
      run_latch(name);
      continue;
    }
    // The other half of the leader share: await_leadership, otherwise an ordinary hold.
    const bool leader_await = !special && shape < multi_pct + leader_pct;
    const long long ttl_ms = race ? pick(150, 400) : pick(ttl_min, ttl_max);
    const auto ttl = std::chrono::milliseconds(ttl_ms);
    std::optional<sqllock::lease_guard> g;
    std::atomic<bool> lost_cb{false};
    sqllock::lease_options lo;
    lo.ttl = ttl;
    lo.on_lost = [&lost_cb, &log, &sfx, stale, rw_write, name, outer_lost = on_lost_of("outer")](const std::string& n,
                                                                                                  std::int64_t tok) {
      lost_cb = true;
      if (stale) return;
      // A write lease's on_lost gets its derived row's name (sqllock.rwlock.<len>.<name>.writer):
      // logged under the lease's own name, so the checker sees the loss of this hold.
      if (rw_write) log.line("O", now_us(), "lost", "outer", name + sfx, tok, "callback");
      else outer_lost(n, tok);
    };
    lo.fair = fair && broken != "fair";
    op("invoke", "acquire", name, 0,
       "ttl=" + std::to_string(ttl.count()) +
           (fair ? ",fair,wait=" + std::to_string(wait.count()) + ",ticket_ttl=" + std::to_string(lo.fair_ticket_ttl.count())
                 : std::string()) +
           (rw_write ? ",write" : ""));
    auto t_req = now_us();
    try {
      if (cancel) {
        std::stop_source stop;
        const auto cancel_after = std::chrono::milliseconds(pick(0, wait.count()));
        std::jthread canceller([&stop, cancel_after](std::stop_token own) {
          std::mutex m;
          std::condition_variable_any cv;
          std::unique_lock lk(m);
          cv.wait_for(lk, own, cancel_after, [] { return false; });
          if (!own.stop_requested()) stop.request_stop();  // not once the acquire has returned
        });
        try {
          g = c->acquire_for(name, wait, lo, stop.get_token());
        } catch (const sqllock::acquire_timeout&) {
          g.reset();
        }
      } else if (leader_await) {
        try {
          g = sqllock::await_leadership(*c, name, wait, lo);
        } catch (const sqllock::acquire_timeout&) {
          g.reset();
        }
      } else {
        g = permits > 0  ? c->try_acquire_permit_for(name, permits, wait, lo)
            : rw_write ? (broken == "rw" ? c->try_acquire_read_for(name, wait, lo) : c->try_acquire_write_for(name, wait, lo))
                       : c->try_acquire_for(name, wait, lo);
      }
    } catch (const std::exception& e) {
      const auto k = error_kind(e);
      op(phase_of(k), "acquire", name, 0, k);
      if (k == "cancelled") {
        if (broken == "cancel") {  // the deliberately broken variant: a lease nobody is told about
          try {
            sqllock::lease_options leak_lo;
            leak_lo.ttl = std::chrono::milliseconds(ttl_min);
            if (auto leak = c->try_acquire_for(name, 1500ms, leak_lo)) {
              broken_kept.push_back(std::move(*leak));
            }
          } catch (const std::exception&) {
          }
        }
        // A cancelled acquisition must leave nothing behind: after a moment (a statement still in
        // flight would have landed), the row must not be held under a token this worker was never given.
        std::this_thread::sleep_for(std::chrono::milliseconds(pick(20, 150)));
        inspect_op("after_cancel", name);
        continue;
      }
      failed("acquire", e);
      continue;
    }
    if (!g) {
      op("fail", "acquire", name, 0, "timeout");
      if (!rw_write) log.line("N", name + sfx, t_req, now_us());
      continue;
    }
    if (permits > 0) name = slot_name(name, g->permit());
    // (check_history reads a reader-writer hold's ok detail, exactly `write`.)
    op("ok", "acquire", name, g->fencing_token(),
       rw_write ? std::string("write")
                : "hold=" + std::to_string(g->hold_count()) + (leader_await ? ",await_leadership" : "") + (fair ? ",fair" : ""));
    consecutive_errors = 0;
    const std::int64_t token = g->fencing_token();
    // The label plus the pid: what the fenced write records, unique per process even when the
    // label is shared.
    const std::string holder = g->holder_id() + "#" + std::to_string(getpid()) + thread_tag;
    log.line("A", name + sfx, token, holder, t_req, now_us());

    if (race) {
      // Hold across zero to several renewals, then release, most likely while one is in flight.
      std::this_thread::sleep_for(std::chrono::microseconds(pick(0, ttl_ms * 1500)));
      op("invoke", "release", name, token, "race");
      auto t_rr = now_us();
      std::string result = "ok";
      const bool lost_before_release = g->lost();
      try {
        if (broken == "race") {  // the deliberately broken variant: claims a release it never made
          broken_kept.push_back(std::move(*g));
        } else {
          g->release();
        }
        op("ok", "release", name, token, "race");
      } catch (const std::exception& e) {
        result = error_kind(e);
        op(result == "lease_lost" || result == "not_holder" ? "fail" : phase_of(result), "release", name, token,
           result);
        if (result != "lease_lost" && result != "not_holder") log.line("E", "release", result, now_us(), e.what());
      }
      log.line("R", name + sfx, token, t_rr, now_us(), result, lost_before_release ? 1 : 0, lost_cb.load() ? 1 : 0);
      g.reset();
      if (result == "ok") {
        // Past the next renewal (a third of the TTL) and a late answer to one in flight.
        std::this_thread::sleep_for(std::chrono::milliseconds(pick(ttl_ms / 2, ttl_ms * 3 / 2)));
        inspect_op("after_release", name);
      }
      if (broken_kept.size() > 4) broken_kept.erase(broken_kept.begin());
      continue;
    }

    // Reentrant nesting: inner guards on the same name, TTL shorter or longer than the outer
    // one, released before the outer; the outer keeps holding past the inner TTL, so an inner
    // hold that shortened the lease shows as another process acquiring meanwhile.
    // One to three inner guards in turn: a re-entry after an inner release whose answer was lost is
    // what a stale re-send of that release could match (ABA on the hold count).
    for (long long cycles = !special && pick(0, 99) < nest_pct ? pick(1, 3) : 0; cycles > 0 && !g_stop.load(); --cycles) {
      const bool shorter = nest_ttl == "shorter" || (nest_ttl != "longer" && pick(0, 1) == 0);
      const auto inner_ttl = std::chrono::milliseconds(
          shorter ? pick(std::max(1LL, ttl_ms / 8), std::max(1LL, ttl_ms / 3)) : pick(ttl_ms * 3 / 2, ttl_ms * 3));
      op("invoke", "inner_acquire", name, token, "ttl=" + std::to_string(inner_ttl.count()));
      std::optional<sqllock::lease_guard> inner;
      try {
        sqllock::lease_options lo;
        lo.ttl = inner_ttl;
        lo.on_lost = on_lost_of("inner");
        inner = c->try_acquire_for(name, wait, lo);
        if (inner) {
          op("ok", "inner_acquire", name, inner->fencing_token(), "hold=" + std::to_string(inner->hold_count()));
        } else {
          op("fail", "inner_acquire", name, 0, "timeout");
        }
      } catch (const std::exception& e) {
        op(phase_of(error_kind(e)), "inner_acquire", name, 0, error_kind(e));
        log.line("E", "inner_acquire", error_kind(e), now_us(), e.what());
      }
      if (inner) {
        const long long inner_ms = inner_ttl.count();
        std::this_thread::sleep_for(std::chrono::milliseconds(pick(5, std::min(300LL, inner_ms / 2 + 5))));
        const bool was_lost = inner->lost();
        if (was_lost) op("lost", "inner", name, token, "flag");
        op("invoke", "inner_release", name, token, "");
        try {
          inner->release();
          op("ok", "inner_release", name, token, "");
        } catch (const std::exception& e) {
          auto k = error_kind(e);
          op(k == "lease_lost" || k == "not_holder" ? "fail" : phase_of(k), "inner_release", name, token, k);
          if (k == "lease_lost" || k == "not_holder") op("lost", "inner", name, token, "release");
          else log.line("E", "inner_release", k, now_us(), e.what());
        }
        inner.reset();
      }
      // Hold the outer guard past the inner TTL (when shorter) by up to half the outer TTL more.
      std::this_thread::sleep_for(std::chrono::milliseconds(
          shorter ? pick(inner_ttl.count() + 100, inner_ttl.count() + ttl_ms / 2) : pick(5, ttl_ms / 4)));
    }

    // The critical section: mostly short, sometimes longer than a renewal period.
    long long hold_ms = rw_write            ? pick(5, std::max(6LL, ttl_ms / 2))
                        : fair              ? pick(50, std::clamp(ttl_ms / 3, 51LL, 1000LL))
                        : pick(0, 99) < 5 ? pick(ttl_ms, ttl_ms * 3 / 2)
                                          : pick(5, ttl_ms / 5);
    std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));

    // The fenced write: applies only when our token is >= the highest already applied.
    const std::int64_t val = (index << 32) | ++seq;
    bool lost_before = !stale && g->lost();
    if (lost_before) op("lost", "outer", name, token, "flag");
    auto t_ws = now_us();
    std::string applied = "0";
    bool committing = false;
    // A guarded write (issue 13): the transaction first checks the lease in the database and holds
    // off every takeover until it ends; the history checker then demands that it never commits
    // after another worker's acquisition of the name was acknowledged, and (with no fence
    // condition in its UPDATE) that applied tokens still increase in commit order.
    const bool guarded = !stale && pick(0, 99) < guard_pct;
    op("invoke", "write", name, token, std::to_string(val) + (guarded ? ":guarded" : ""));
    try {
      auto tx = c->begin();
      if (guarded) tx.require_lease(*g);
      if (durable_writes && c->backend_name() == "postgresql") tx.execute("SET LOCAL synchronous_commit = on");
      auto n = guarded || stale ? tx.execute(update_guarded, {val, token, holder, name + sfx})
                       : tx.execute(update, {val, token, holder, name + sfx, token});
      if (n == 1) tx.execute(insert, {name + sfx, token, holder, val});
      log.line("X", name + sfx, token, now_us());  // inside the transaction, its writes not yet committed
      if (pick(0, 99) < slow_pct) std::this_thread::sleep_for(std::chrono::milliseconds(pick(100, 400)));
      committing = true;
      tx.commit();
      applied = n == 1 ? "1" : "0";
      op("ok", "write", name, token, applied == "1" ? "applied" : "rejected");
    } catch (const std::exception& e) {
      if (committing) applied = "?";
      op(committing ? "unknown" : "fail", "write", name, token, error_kind(e));
      log.line("E", "write", error_kind(e), now_us(), e.what());
    }
    log.line("W", name + sfx, token, holder, t_ws, now_us(), applied, lost_before ? 1 : 0, val);

    // An explicit renew: after a takeover it must fail the owner check and mark the guard lost.
    op("invoke", "renew", name, token, "");
    auto t_u0 = now_us();
    std::string renewed = "ok";
    try {
      g->renew();
      op("ok", "renew", name, token, "");
    } catch (const std::exception& e) {
      renewed = error_kind(e);
      if (stale) {
        renewed = "ok";  // broken: the refusal ignored
        op("ok", "renew", name, token, "");
      } else if (renewed != "lease_lost" && renewed != "not_holder") {
        op(phase_of(renewed), "renew", name, token, renewed);
        log.line("E", "renew", renewed, now_us(), e.what());
      } else {
        op("fail", "renew", name, token, renewed);
        op("lost", "outer", name, token, "renew");
      }
    }
    log.line("U", name + sfx, token, t_u0, now_us(), renewed, !stale && g->lost() ? 1 : 0);

    bool lost_before_release = !stale && g->lost();
    if (lost_before_release) op("lost", "outer", name, token, "flag");
    op("invoke", "release", name, token, "");
    auto t_rr = now_us();
    std::string result = "ok";
    try {
      g->release();
      op("ok", "release", name, token, "");
    } catch (const std::exception& e) {
      result = error_kind(e);
      if (stale) {
        result = "ok";  // broken: the refusal ignored
        op("ok", "release", name, token, "");
      } else if (result != "lease_lost" && result != "not_holder") {
        op(phase_of(result), "release", name, token, result);
        log.line("E", "release", result, now_us(), e.what());
      } else {
        op("fail", "release", name, token, result);
      }
    }
    // (release() empties the guard, so lost() is read before it.)
    log.line("R", name + sfx, token, t_rr, now_us(), result, lost_before_release ? 1 : 0,
             !stale && lost_cb.load() ? 1 : 0);
    g.reset();
  }
  log.line("Q", now_us());
  return 0;
}

// ---------------------------------------------------------------- inventory

int run_inventory(const args& a) {
  auto url = a.get("url");
  auto prefix = a.get("prefix");
  auto strategy = a.get("strategy");
  long long index = a.num("index", 0);
  line_log log(a.get("log"));
  log.line("P", getpid(), now_us(), index);
  auto c = connect_retry(url, &log);
  const std::string stock = stock_table(prefix, strategy);
  const std::string insert = "INSERT INTO " + sales_table(prefix, strategy) + " (worker, n) VALUES (?, ?)";
  std::int64_t n = 0;
  int errors = 0;
  long long first_error_us = 0;
  while (!g_stop.load() && c) {
    bool sold = false;
    bool out = false;
    ++n;
    try {
      if (strategy == "atomic") {
        auto tx = c->begin();
        if (tx.execute("UPDATE " + stock + " SET qty = qty - 1 WHERE sku = 'sku' AND qty > 0") == 1) {
          tx.execute(insert, {index, n});
          tx.commit();
          sold = true;
        } else {
          out = true;
        }
      } else if (strategy == "cas") {
        sqllock::retry_policy policy;
        policy.max_attempts = 100;
        sold = sqllock::with_retry(*c, [&](sqllock::transaction& tx) {
          auto rows = tx.query("SELECT qty, version FROM " + stock + " WHERE sku = ?", {std::string("sku")});
          auto qty = rows.at(0).as_int(0);
          auto version = rows.at(0).as_int(1);
          if (qty < 1) return false;
          tx.cas({.table = stock, .key = {{"sku", std::string("sku")}}, .version_column = "version",
                  .expected_version = version, .set = {{"qty", qty - 1}}})
              .value();
          tx.execute(insert, {index, n});
          return true;
        }, policy);
        out = !sold;
      } else {
        auto tx = c->begin();
        auto locked = tx.lock_rows({.table = stock, .key_column = "sku", .keys = {std::string("sku")},
                                    .columns = {"sku", "qty"}, .mode = sqllock::lock_wait::wait,
                                    .timeout = std::chrono::milliseconds(10000)});
        if (locked.acquired()) {
          if (locked.rows.at(0).as_int(1) < 1) {
            out = true;
          } else {
            tx.execute("UPDATE " + stock + " SET qty = qty - 1 WHERE sku = 'sku'");
            tx.execute(insert, {index, n});
            tx.commit();
            sold = true;
          }
        }
      }
      errors = 0;
    } catch (const std::exception& e) {
      log.line("E", "sell", error_kind(e), now_us(), e.what());
      if (errors++ == 0) first_error_us = now_us();
      if (errors >= 5 && now_us() - first_error_us > 15'000'000) {
        c.reset();
        c = connect_retry(url, &log);
        errors = 0;
      }
      std::this_thread::sleep_for(20ms);
      continue;
    }
    if (sold) log.line("S", index, n, now_us());  // acknowledged only after the commit returned
    if (out) {
      log.line("D", now_us());
      return 0;
    }
  }
  log.line("Q", now_us());
  return 0;
}

// ---------------------------------------------------------------- the write-availability probe

// Acquires and releases a name of its own (never contended) every 50 ms and logs each try:
// H t_start t_end ok|busy|<error kind>. A long gap between successful tries is a time when the
// database took no writes at all (an I/O stall of the host, a server restart): the checker does
// not blame the lock library for a waiter that timed out then.
int run_probe(const args& a) {
  line_log log(a.get("log"));
  auto c = connect_retry(a.get("url"), &log);
  const std::string name = a.get("prefix") + "_probe";
  while (!g_stop.load() && c) {
    const auto t0 = now_us();
    std::string result = "busy";
    try {
      if (auto g = c->try_acquire(name, {.ttl = 5s, .auto_renew = false})) {
        g->release();
        result = "ok";
      }
    } catch (const std::exception& e) {
      result = error_kind(e);
    }
    log.line("H", t0, now_us(), result);
    std::this_thread::sleep_for(50ms);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: fault_worker setup|lock|inventory|verify|dump|cleanup|probe --key value...\n";
    return 64;
  }
  std::string mode = argv[1];
  args a;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (!k.starts_with("--")) {
      std::cerr << "fault_worker: expected --key value, got " << k << '\n';
      return 64;
    }
    a.v[k.substr(2)] = argv[i + 1];
  }
  // The driver starts each worker in its own session (so that no orphaned process group can SIGCONT
  // a worker it stopped); a worker therefore no longer shares the driver's group, and dies with it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  struct sigaction sa {};
  sa.sa_handler = on_term;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  try {
    if (mode == "setup") return run_setup(a);
    if (mode == "lock") return run_lock(a);
    if (mode == "inventory") return run_inventory(a);
    if (mode == "verify") return run_verify(a);
    if (mode == "dump") return run_dump(a);
    if (mode == "cleanup") return run_cleanup(a);
    if (mode == "probe") return run_probe(a);
    if (mode == "connect") {
      try {
        sqllock::connect(a.get("url"));
        return 0;
      } catch (const sqllock::database_error& e) {  // a refused server setting (e.g. lazy durability)
        std::cerr << "refused: " << e.what() << '\n';
        return 3;
      } catch (const sqllock::invalid_argument& e) {
        std::cerr << "refused: " << e.what() << '\n';
        return 3;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "fault_worker " << mode << ": " << error_kind(e) << ": " << e.what() << '\n';
    return 2;
  }
  std::cerr << "fault_worker: unknown mode " << mode << '\n';
  return 64;
}
