// Through PgBouncer in transaction mode (scripts/pgbouncer-server.sh): what only a pooler can do to
// a lease. A missing SQLLOCK_TEST_PGBOUNCER_URL fails every test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/test_support.hpp"
#include "sqllock/sqllock.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

std::string pooler_url() {
  const char* url = std::getenv("SQLLOCK_TEST_PGBOUNCER_URL");
  return url ? url : "";
}

int pool_size() {
  const char* size = std::getenv("SQLLOCK_TEST_PGBOUNCER_POOL_SIZE");
  return size && *size ? std::atoi(size) : 4;
}

long long ms_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

class pgbouncer : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(pooler_url().empty()) << "SQLLOCK_TEST_PGBOUNCER_URL is not set; start PgBouncer with "
                                          "scripts/pgbouncer-server.sh (a failure, not a skip)";
  }
};

// Every server connection of the pool is taken by an application's open transaction: the holder's
// renewals wait in PgBouncer's queue, not in the server. The holder must still learn of its loss by
// its own clock, no later than the TTL after its last renewal could have started, and the next
// holder (once the pool frees up) gets a larger token.
TEST_F(pgbouncer, AnExhaustedPoolStillReportsTheLeaseLostInTime) {
  const auto url = pooler_url();
  const int busy = pool_size();
  const auto ttl = 1500ms;
  const auto name = sqllock_testing::unique_name("pool_exhausted");

  auto holder = sqllock::connect(url);
  std::vector<sqllock::client> apps;
  for (int i = 0; i < busy; ++i) apps.push_back(sqllock::connect(url));
  auto next = sqllock::connect(url);

  std::atomic<clock_type::rep> lost_at{0};
  sqllock::lease_options held;
  held.ttl = ttl;
  held.on_lost = [&](const std::string&, std::int64_t) { lost_at = clock_type::now().time_since_epoch().count(); };
  auto g = holder.acquire_for(name, 10s, held);
  std::this_thread::sleep_for(700ms);  // at least one renewal went through
  ASSERT_FALSE(g.lost());

  // Take every server connection: each transaction has run a statement, so PgBouncer has bound it
  // to a server connection until it ends. The last one is taken at `pool_full`.
  std::vector<std::optional<sqllock::transaction>> txs;
  for (auto& app : apps) {
    txs.emplace_back(app.begin());
    txs.back()->query("SELECT 1");
  }
  const auto pool_full = clock_type::now();

  while (!g.lost() && ms_between(pool_full, clock_type::now()) < 5000) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(g.lost()) << "the holder did not learn of its loss within 5 s of the pool filling up";
  ASSERT_NE(lost_at.load(), 0) << "on_lost was not called";
  const auto lost = clock_type::time_point(clock_type::duration(lost_at.load()));
  // Renewals that started after `pool_full` cannot have been answered; one that started before may
  // have been. So the lease's local expiry is at most pool_full + ttl (10 ms for the loop's slack).
  std::cout << "[ NOTE     ] pool of " << busy << " full; loss reported " << ms_between(pool_full, lost)
            << " ms later (TTL " << std::chrono::milliseconds(ttl).count() << " ms)\n";
  EXPECT_LE(ms_between(pool_full, lost), std::chrono::milliseconds(ttl).count() + 10)
      << "the loss was reported after the lease could have been taken over";

  for (auto& tx : txs) tx->commit();
  txs.clear();
  sqllock::lease_options next_options;
  next_options.ttl = 5s;
  auto h = next.acquire_for(name, 10s, next_options);
  EXPECT_GT(h.fencing_token(), g.fencing_token());
  EXPECT_GE(ms_between(lost, clock_type::now()), 0);
}

// Many clients and threads through a pool smaller than their number of connections: every lease
// statement is one transaction, so the clients share the few server connections without error.
TEST_F(pgbouncer, MoreClientsThanServerConnectionsShareThePool) {
  const auto url = pooler_url();
  const auto name = sqllock_testing::unique_name("pool_shared");
  constexpr int clients = 12;
  constexpr int rounds = 10;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> done{0};
  std::atomic<std::int64_t> last_token{0};
  std::atomic<int> token_regressions{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&] {
      auto c = sqllock::connect(url);
      sqllock::lease_options options;
      options.ttl = 5s;
      for (int r = 0; r < rounds; ++r) {
        auto g = c.acquire_for(name, 60s, options);
        if (inside.fetch_add(1) != 0) ++overlaps;
        if (g.fencing_token() <= last_token.load()) ++token_regressions;
        last_token = g.fencing_token();
        std::this_thread::sleep_for(2ms);
        inside.fetch_sub(1);
        g.release();
        ++done;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), clients * rounds);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(token_regressions.load(), 0);
}

}  // namespace

int main(int argc, char** argv) {
  const auto url = pooler_url();
  if (!url.empty()) {
    if (int rc = sqllock_testing::prepare_database(url, "pgbouncer_tests")) return rc;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
