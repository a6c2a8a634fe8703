// Conformance: the edges of the API that the contract spells out (issue 10 item 16).
#include <stop_token>
#include <thread>

#include "conformance/fixture.hpp"

using namespace std::chrono_literals;
using namespace sqllock_test;

TEST(ApiEdges, ATimeoutTooLargeToRepresentWaitsWithoutBound) {
  auto a = make_client();
  auto b = make_client();
  const auto name = unique_name("max_timeout");
  auto g = a.try_acquire(name);
  ASSERT_TRUE(g);
  std::jthread releaser([&] {
    std::this_thread::sleep_for(400ms);
    g->release();
  });
  const auto start = clock::now();
  auto h = b.acquire_for(name, std::chrono::milliseconds::max());  // gave up at once before
  EXPECT_GE(ms_since(start), 300);
  EXPECT_GT(h.fencing_token(), 0);
  auto i = b.try_acquire_for(unique_name("max_timeout_free"), std::chrono::milliseconds::max());
  EXPECT_TRUE(i);
}

TEST(ApiEdges, AnAlreadyStoppedTokenAcquiresNothing) {
  auto a = make_client();
  const auto name = unique_name("stopped");
  std::stop_source stop;
  stop.request_stop();
  const auto before = a.statement_count();
  EXPECT_THROW(a.acquire(name, {}, stop.get_token()), sqllock::cancelled);
  EXPECT_THROW(a.acquire_for(name, 5s, {}, stop.get_token()), sqllock::cancelled);
  EXPECT_EQ(a.statement_count(), before);
  EXPECT_FALSE(a.inspect(name)) << "a free lock was acquired with a stopped token";
}

TEST(ApiEdges, ReleasingAFinishedGuardDoesNothing) {
  auto a = make_client();
  const auto name = unique_name("release_twice");
  auto g = a.try_acquire(name);
  ASSERT_TRUE(g);
  g->release();
  EXPECT_NO_THROW(g->release());
  EXPECT_FALSE(g->owns());
  sqllock::lease_guard empty;
  EXPECT_NO_THROW(empty.release());
  EXPECT_FALSE(a.inspect(name));
}

TEST(ApiEdges, ActingOnAReleasedGuardIsNotHolder) {
  // Renewing, or guarding a transaction with, a lease this guard already released names the
  // mistake (not_holder), changes nothing, and does not take the lock back.
  auto a = make_client();
  const auto name = unique_name("not_holder");
  auto g = a.try_acquire(name);
  ASSERT_TRUE(g);
  g->release();
  EXPECT_THROW(g->renew(), sqllock::not_holder);
  {
    auto tx = a.begin();
    EXPECT_THROW(tx.require_lease(*g), sqllock::not_holder);
    tx.rollback();
  }
  sqllock::lease_guard empty;
  auto tx = a.begin();
  EXPECT_THROW(tx.require_lease(empty), sqllock::invalid_argument);
  tx.rollback();
  EXPECT_FALSE(a.inspect(name)) << "acting on a released guard took the lock back";
}

TEST(ApiEdges, ADroppedLockTableIsCreatedAgainByMigrate) {
  // Issue 10 item 15: migrate said "up to date" while every command said "run sqllock migrate".
  const auto table = unique_name("dropped");
  auto c = make_client({.table = table, .require_schema = false});
  ASSERT_EQ(c.migrate(), sqllock::client::required_schema_version());
  {
    auto tx = c.begin();
    tx.execute("DROP TABLE " + table);
    tx.commit();
  }
  EXPECT_EQ(c.schema_version(), 0);
  EXPECT_THROW(sqllock::connect(hooks().url, {.table = table}), sqllock::schema_missing);
  EXPECT_EQ(c.migrate(), sqllock::client::required_schema_version());
  auto again = make_client({.table = table});
  EXPECT_TRUE(again.try_acquire(unique_name("after_drop")));
  auto tx = c.begin();
  tx.execute("DROP TABLE " + table);
  tx.execute("DROP TABLE " + table + "_schema");
  tx.execute("DROP TABLE " + table + "_semaphores");
  tx.execute("DROP TABLE " + table + "_queue");
  tx.commit();
}
