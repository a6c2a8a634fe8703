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
// lane for seconds. Thread R of `a` meanwhile releases a lease 1 s before its loss point, while
// client `b` keeps trying to take that name. The release may not wait for the lane past the loss
// point: it returns by then (ok, connection_lost or lease_lost, nothing untyped); `b` gets the name
// by the lease's end (the row is never left held by nobody), with a larger token.
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
  // Another client tries to take the name from now on, beside the release: it must get it by the
  // lease's end (plus slack), with a larger token, whatever the release is doing.
  std::optional<sqllock::lease_guard> other;
  long long taken_at = -1;
  std::jthread taker([&] {
    for (;;) {
      try {
        other = b.try_acquire(name, {.auto_renew = false});
      } catch (const sqllock::error& e) {
        ADD_FAILURE() << "the other client's try_acquire threw: " << e.what();
      }
      if (other || clock::now() >= t0 + ttl + 1000ms) break;
      std::this_thread::sleep_for(50ms);
    }
    taken_at = ms_since(t0);
  });
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
  EXPECT_TRUE(lane_still_busy) << "the waiter had left the lane when release() returned: release() waited for it";
  std::cout << "[ release ] " << outcome << " after " << release_ms << " ms, " << returned_at
            << " ms after the acquire began\n";

  taker.join();
  ASSERT_TRUE(other) << "the name was still held " << taken_at << " ms after the acquire began";
  EXPECT_LT(taken_at, 2000 + 1000) << "another client could take the name only " << taken_at
                                   << " ms after the acquire began";
  std::cout << "[ release ] another client acquired it " << taken_at << " ms after the acquire began, token "
            << other->fencing_token() << " (released token " << token << ")\n";
  EXPECT_GT(other->fencing_token(), token);
  other->release();

  tx.rollback();  // lets the waiter go
  waiter.join();
}
