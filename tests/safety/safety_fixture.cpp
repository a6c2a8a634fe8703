// The safety suite's fixture: hooks, clients, the fault proxy, server crashes.
#include "safety/safety_fixture.hpp"

#include <cstdlib>
#include <iostream>

namespace sqllock_safety {
namespace {
backend_hooks g_hooks;
}  // namespace

const backend_hooks& hooks() { return g_hooks; }

int run_suite(int argc, char** argv, backend_hooks h) {
  g_hooks = std::move(h);
  if (g_hooks.url.empty() || (g_hooks.name != "sqlite" && (g_hooks.admin_url.empty() || g_hooks.crash.empty()))) {
    std::cerr << "safety_" << g_hooks.name << ": the " << g_hooks.name
              << " server's URL, admin URL or crash command is missing; start it with scripts/test-all.sh "
                 "(this is a failure, not a skip)\n";
    return 2;
  }
  if (int rc = sqllock_testing::prepare_database(g_hooks.url, "safety_" + g_hooks.name)) return rc;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

sqllock::client make_client(sqllock::client_options options) { return sqllock::connect(g_hooks.url, options); }

std::unique_ptr<sqllock::test::fault_proxy> make_proxy() {
  auto u = sqllock::parse_url(g_hooks.url);
  return std::make_unique<sqllock::test::fault_proxy>(u.host.empty() ? "127.0.0.1" : u.host, u.port);
}

void crash_server() {
  const int rc = std::system((g_hooks.crash + " >/dev/null 2>&1").c_str());
  ASSERT_EQ(rc, 0) << "crash command failed: " << g_hooks.crash;
}

}  // namespace sqllock_safety
