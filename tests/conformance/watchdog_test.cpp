// Conformance: the watchdog keeps leases alive, batches renewals, and reports loss.
#include <atomic>
#include <thread>

#include "conformance/fixture.hpp"

using namespace std::chrono_literals;
using namespace sqllock_test;

TEST(Watchdog, KeepsALeaseAliveWellPastItsTtl) {
  auto a = make_client();
  auto b = make_client();
  auto name = unique_name("alive");
  auto g = a.try_acquire(name, {.ttl = 300ms});
  ASSERT_TRUE(g);
  std::this_thread::sleep_for(1500ms);  // five TTLs
  EXPECT_FALSE(b.try_acquire(name));
  EXPECT_FALSE(g->lost());
  EXPECT_EQ(b.inspect(name)->fencing_token, g->fencing_token());
  EXPECT_GT(b.inspect(name)->time_left, 50ms);
}

TEST(Watchdog, ReportsLossWhenTheLeaseIsStolen) {
  auto a = make_client();
  auto b = make_client();
  auto name = unique_name("stolen");
  std::atomic<int> calls{0};
  std::atomic<std::int64_t> lost_token{0};
  auto g = a.try_acquire(name, {.ttl = 300ms, .on_lost = [&](const std::string& n, std::int64_t token) {
                                  if (n == name) lost_token = token;
                                  ++calls;
                                }});
  ASSERT_TRUE(g);
  ASSERT_TRUE(b.force_release(name));
  auto h = b.try_acquire(name);
  ASSERT_TRUE(h);
  auto start = clock::now();
  while (!g->lost() && ms_since(start) < 3000) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(g->lost());
  // on_lost is told right after lost() flips, by the deciding thread once it let go of the book's lock.
  EXPECT_TRUE(eventually([&] { return calls.load() == 1; }, 2s));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(lost_token.load(), g->fencing_token());
  EXPECT_EQ(b.inspect(name)->holder, b.holder_id());  // the watchdog did not renew the thief's lease
}

TEST(Watchdog, ReportsLossWhenTheRowIsDeleted) {
  auto a = make_client();
  auto name = unique_name("deleted");
  auto g = a.try_acquire(name, {.ttl = 300ms});
  ASSERT_TRUE(g);
  {
    auto tx = a.begin();
    EXPECT_EQ(tx.execute("DELETE FROM sqllock_locks WHERE name = ?", {name}), 1);
    tx.commit();
  }
  auto start = clock::now();
  while (!g->lost() && ms_since(start) < 3000) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(g->lost());
}

TEST(Watchdog, RenewalsOfManyLeasesAreBatched) {
  auto a = make_client();
  std::vector<sqllock::lease_guard> guards;
  for (int i = 0; i < 60; ++i) {
    auto g = a.try_acquire(unique_name("batch"), {.ttl = 600ms});
    ASSERT_TRUE(g);
    guards.push_back(std::move(*g));
  }
  auto before = a.statement_count();
  std::this_thread::sleep_for(1200ms);  // about six renewal rounds of 60 leases
  auto renew_statements = a.statement_count() - before;
  for (auto& g : guards) EXPECT_FALSE(g.lost());
  EXPECT_GE(renew_statements, 2u);
  EXPECT_LE(renew_statements, 20u) << "renewals were not batched";
}

TEST(Watchdog, ALeaseWithoutAutoRenewSimplyExpires) {
  auto a = make_client();
  auto b = make_client();
  auto name = unique_name("no_renew");
  auto g = a.try_acquire(name, {.ttl = 200ms, .auto_renew = false});
  ASSERT_TRUE(g);
  std::this_thread::sleep_for(400ms);
  EXPECT_TRUE(b.try_acquire(name));
}
