// Shared fixture of the conformance suite: backend hooks, unique names, clients, child processes.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
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

}  // namespace sqllock_test
