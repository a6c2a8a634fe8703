// Conformance: holder labels are not identities, re-entry is the client's, a re-entered hold never
// shortens the lease around it.
#include <thread>

#include "conformance/fixture.hpp"

using namespace std::chrono_literals;
using namespace sqllock_test;

// Issue 10 item 2: two clients (two processes in the field, `sqllock run --holder nightly-job`
// twice) given the same label both believed they held the lock, with the same token.
TEST(Holder, ClientsSharingALabelStillExcludeEachOther) {
  const auto label = unique_name("nightly-job");
  for (auto scope : {sqllock::holder_scope::per_client, sqllock::holder_scope::per_thread}) {
    auto a = make_client({.holder_id = label, .scope = scope});
    auto b = make_client({.holder_id = label, .scope = scope});
    const auto name = unique_name("shared_label");
    auto g = a.try_acquire(name);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->holder_id(), label);
    EXPECT_FALSE(b.try_acquire(name)) << "a client with the same label entered a lock it does not hold";
    EXPECT_FALSE(b.try_acquire_for(name, 300ms));
    auto info = b.inspect(name);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->holder, label);         // the label is shown...
    EXPECT_EQ(info->owner, g->owner_id());  // ...the owner id tells the acquisitions apart
    EXPECT_EQ(info->hold_count, 1);
    g->release();
    auto h = b.try_acquire(name);
    ASSERT_TRUE(h);
    EXPECT_GT(h->fencing_token(), g->fencing_token());
    EXPECT_NE(h->owner_id(), g->owner_id());
  }
}

// Issue 10 item 3: an inner hold with a short TTL cut the whole lease to that TTL; 600 ms after the
// inner release another client took the lock while the outer guard believed it held it.
TEST(Holder, AShortReentrantHoldNeverShortensTheLease) {
  auto a = make_client();
  auto b = make_client();
  const auto name = unique_name("short_inner");
  auto outer = a.try_acquire(name, {.ttl = 30s});
  ASSERT_TRUE(outer);
  {
    auto inner = a.try_acquire(name, {.ttl = 600ms});
    ASSERT_TRUE(inner);
    EXPECT_EQ(inner->fencing_token(), outer->fencing_token());
    EXPECT_NO_THROW(inner->renew());
    auto no_renew = a.try_acquire(name, {.ttl = 300ms, .auto_renew = false});
    ASSERT_TRUE(no_renew);
  }
  std::this_thread::sleep_for(1000ms);
  EXPECT_FALSE(b.try_acquire(name)) << "the lease was cut to the inner hold's TTL";
  EXPECT_FALSE(outer->lost());
  EXPECT_GT(b.inspect(name)->time_left, 25s);
  EXPECT_GT(outer->valid_until(), std::chrono::steady_clock::now() + 25s);
}

// A re-entered hold that asks for longer than the lease is known to last gets it, without ever
// shortening it afterwards; and re-entry sends no statement when nothing needs extending.
TEST(Holder, ReentryIsTheClientsAndSendsNoStatement) {
  auto a = make_client();
  const auto name = unique_name("reentry");
  auto outer = a.try_acquire(name, {.ttl = 2s, .auto_renew = false});
  ASSERT_TRUE(outer);
  const auto before = a.statement_count();
  auto inner = a.try_acquire(name, {.ttl = 1s});
  ASSERT_TRUE(inner);
  EXPECT_EQ(a.statement_count(), before);
  // Asks for longer than the lease is known to last and will not renew: one extension.
  auto longer = a.try_acquire(name, {.ttl = 20s, .auto_renew = false});
  ASSERT_TRUE(longer);
  EXPECT_EQ(a.statement_count(), before + 1);
  EXPECT_GT(a.inspect(name)->time_left, 15s);
  EXPECT_EQ(a.inspect(name)->hold_count, 3);
}

// Per-thread scope: another thread of the same client is another holder.
TEST(Holder, AnotherThreadOfTheSameClientWaitsAndGetsANewToken) {
  auto a = make_client();
  const auto name = unique_name("threads_wait");
  auto g = a.try_acquire(name);
  ASSERT_TRUE(g);
  const auto token = g->fencing_token();
  std::int64_t other_token = 0;
  std::thread t([&] {
    auto h = a.acquire_for(name, 5s);
    other_token = h.fencing_token();
  });
  std::this_thread::sleep_for(200ms);
  g->release();
  t.join();
  EXPECT_GT(other_token, token);
}
