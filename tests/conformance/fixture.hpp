// Shared fixture of the conformance suite: backend hooks, unique names, clients, child processes.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/test_support.hpp"
#include "sqllock/sqllock.hpp"

namespace sqllock_test {

/// What a backend's test program supplies (main_<backend>.cpp).
struct backend_hooks {
  std::string name;  ///< "sqlite", "postgresql", "mysql"
  std::string url;   ///< where the suite connects
  /// SQLite locks the whole database for writers: row locks never coexist and SKIP LOCKED is empty.
  bool whole_database_row_locks = false;
  /// Waiters in another process are woken by an event (not only by polling).
  bool cross_process_wake = true;
  /// A Galera node (wsrep_on): wake-ups are read from rows, certification conflicts re-send.
  bool multi_primary = false;
  /// Reached through a transaction pooler (PgBouncer, pool_mode=transaction) with sqllock's pooler
  /// options on the URL: no session state, so no LISTEN; other processes' releases are seen by polling.
  bool transaction_pooler = false;
};

const backend_hooks& hooks();
/// Called by each main: records the hooks, handles child-process mode, migrates, runs the tests.
int run_suite(int argc, char** argv, backend_hooks h);

/// A lock or table name unique to this test run.
using sqllock_testing::eventually;
using sqllock_testing::unique_name;
/// A client on the suite's database; the lock tables already exist.
sqllock::client make_client(sqllock::client_options options = {});
/// Poll intervals so long that only an event can explain a quick wake-up.
sqllock::client_options events_only_options();

/// The schema-table row of `version` (in `schema_table`, the lock table's name + "_schema"), as
/// each backend's migrate() records it.
std::string record_version_sql(sqllock::dialect d, const std::string& schema_table, int version);

/// A user table `name (id BIGINT PRIMARY KEY, qty BIGINT NOT NULL, version BIGINT NOT NULL)`
/// with rows (id, qty, 1) for the given ids; dropped at scope end.
class user_table {
 public:
  user_table(sqllock::client& c, const std::vector<std::pair<std::int64_t, std::int64_t>>& rows);
  ~user_table();
  const std::string& name() const { return name_; }
  std::int64_t qty(std::int64_t id);
  std::int64_t version(std::int64_t id);

 private:
  sqllock::client& c_;
  std::string name_;
};

/// Start this test program again as a child running `role` with args; returns its pid.
int spawn_child(const std::string& role, const std::vector<std::string>& args);
/// Wait for a child; returns its exit code (or 128 + signal).
int wait_child(int pid);

using clock = std::chrono::steady_clock;
inline long long ms_since(clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - t).count();
}

/// Holds up a client's deadline thread, as a descheduled thread would be, until destroyed: a lease
/// of its own (100 ms, not renewed) whose on_lost, run on that thread, blocks (at most 10 s). The
/// constructor returns once the thread is held (holding()); from then on that client reports no
/// loss by its clock (lost() stays false past the loss point), but its other threads go on.
class deadline_stall {
 public:
  explicit deadline_stall(sqllock::client& c) {
    auto held = held_;
    auto go = go_;
    lease_ = c.try_acquire(unique_name("deadline_stall"),
                           {.ttl = std::chrono::milliseconds(100), .auto_renew = false,
                            .on_lost = [held, go](const std::string&, std::int64_t) {
                              *held = true;
                              const auto until = clock::now() + std::chrono::seconds(10);
                              while (!*go && clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
                            }});
    if (lease_) eventually([&] { return held_->load(); }, std::chrono::seconds(3));
  }
  ~deadline_stall() { *go_ = true; }
  deadline_stall(const deadline_stall&) = delete;
  deadline_stall& operator=(const deadline_stall&) = delete;
  bool holding() const { return held_->load(); }

 private:
  std::shared_ptr<std::atomic<bool>> held_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<std::atomic<bool>> go_ = std::make_shared<std::atomic<bool>>(false);
  std::optional<sqllock::lease_guard> lease_;
};

}  // namespace sqllock_test
