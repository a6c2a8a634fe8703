// Fixture of the safety regression suite: each test reproduces one way exclusion, fencing or
// durability was broken (issue 10) with real servers, crashes and a fault proxy.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/fault_proxy.hpp"
#include "common/test_support.hpp"
#include "sqllock/sqllock.hpp"

namespace sqllock_safety {

/// What a backend's program supplies.
struct backend_hooks {
  std::string name;       ///< "sqlite", "postgresql", "mysql"
  std::string url;        ///< the application's URL
  std::string admin_url;  ///< a superuser (server backends)
  std::string crash;      ///< a shell command: kill -9 the server and start it again
  /// Run one administrative statement outside any transaction (ALTER SYSTEM, SET GLOBAL, KILL).
  std::function<void(const std::string& sql)> admin;
};

const backend_hooks& hooks();
int run_suite(int argc, char** argv, backend_hooks h);

using sqllock_testing::unique_name;
sqllock::client make_client(sqllock::client_options options = {});
/// A fault proxy in front of the server of hooks().url.
std::unique_ptr<sqllock::test::fault_proxy> make_proxy();
/// Kill -9 the server and start it again (hooks().crash); fails the test if the command fails.
void crash_server();

using clock = std::chrono::steady_clock;
inline long long ms_since(clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - t).count();
}

}  // namespace sqllock_safety
