// Safety: a release that has to wait for its client's caller lane (the connection the client's
// threads share) still ends by its lease's loss point (DESIGN, Safety: no lease statement keeps a
// lease's connection, or its caller, busy past that point; the holder learns in time).
#include <atomic>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "safety/safety_fixture.hpp"

using namespace std::chrono_literals;
using namespace sqllock_safety;

// Thread W of client `a` waits in acquire_for on a name whose free row an admin transaction holds
// FOR UPDATE: W's acquire statement waits for that row lock inside the server and keeps a's caller
// lane for seconds. Thread R of `a` meanwhile releases a lease 1 s before its loss point. The
// release may not wait for the lane past the loss point: it returns by then (ok, connection_lost
// or lease_lost, nothing untyped), the name is free for another client by the lease's end, and
// that client's token is larger.
TEST(BusyLane, AReleaseBehindAnotherThreadsBlockedStatementEndsByTheLeasesLossPoint) {
  auto a = make_client();
  auto b = make_client();
  auto admin = make_client();
  const auto blocker = unique_name("lane_blocker");
  const auto name = unique_name("lane_release");
  {  // the blocker's row exists and is free
    auto g = b.try_acquire(blocker, {.auto_renew = false});
    ASSERT_TRUE(g);
    g->release();
  }
  auto tx = admin.begin();
  ASSERT_TRUE(tx.lock_rows({.table = "sqllock_locks", .key_column = "name", .keys = {blocker}}).acquired());

  constexpr auto ttl = 2000ms;
  const auto t0 = clock::now();  // before the acquire: the loss point counts from here
  auto g = a.try_acquire(name, {.ttl = ttl, .auto_renew = false});
  ASSERT_TRUE(g);
  const auto token = g->fencing_token();

  std::atomic<bool> waiter_done{false};
  std::jthread waiter([&] {
    try {
      auto w = a.try_acquire_for(blocker, 5s, {.ttl = 30s, .auto_renew = false});
    } catch (const sqllock::error&) {
      // Whatever the waiter gets is not this test's subject.
    }
    waiter_done = true;
  });

  // 1 s before the loss point (2000 ms TTL minus the 100 ms loss margin): W is in its statement.
  std::this_thread::sleep_until(t0 + 900ms);
  ASSERT_FALSE(waiter_done) << "the waiter ended before the release: the lane was not busy";
  const auto r0 = clock::now();
  std::string outcome = "ok";
  try {
    g->release();
  } catch (const sqllock::connection_lost& e) {
    outcome = std::string("connection_lost: ") + e.what();
  } catch (const sqllock::lease_lost& e) {
    outcome = std::string("lease_lost: ") + e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "release() threw an error that is neither connection_lost nor lease_lost: " << e.what();
    outcome = "other";
  }
  const auto release_ms = ms_since(r0);
  const auto returned_at = ms_since(t0);
  const bool lane_still_busy = !waiter_done;
  // The loss point is 1900 ms after t0; 400 ms slack for a busy machine.
  EXPECT_LT(returned_at, 1900 + 400) << "release() took " << release_ms << " ms (" << outcome << ")";
  EXPECT_TRUE(lane_still_busy) << "the waiter left the lane before the release returned: not the case under test";
  std::cout << "[ release ] " << outcome << " after " << release_ms << " ms, " << returned_at
            << " ms after the acquire began\n";

  // No lease held by nobody past its end: whatever the row shows now ends by the lease's end.
  if (auto info = b.inspect(name)) {
    std::cout << "[ release ] the row then: token " << info->fencing_token << ", " << info->time_left.count()
              << " ms left\n";
    EXPECT_EQ(info->fencing_token, token);
    EXPECT_LE(info->time_left.count(), 2000 - ms_since(t0) + 200) << "the row outlives the lease";
  }
  // Another client takes the name by the lease's end (plus slack), with a larger token.
  std::optional<sqllock::lease_guard> other;
  while (!other && clock::now() < t0 + ttl + 1000ms) {
    other = b.try_acquire(name, {.auto_renew = false});
    if (!other) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(other) << "the name was still held " << ms_since(t0) << " ms after the acquire began";
  std::cout << "[ release ] another client acquired it " << ms_since(t0) << " ms after the acquire began\n";
  EXPECT_GT(other->fencing_token(), token);
  other->release();

  tx.rollback();  // lets the waiter go
  waiter.join();
}
