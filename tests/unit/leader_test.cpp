// Unit tests of the leader latch on a client over the fake backend (core/client_access.hpp).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/test_support.hpp"
#include "core/client_access.hpp"
#include "fake/fake_backend.hpp"
#include "sqllock/leader.hpp"

using namespace std::chrono_literals;
using sqllock::detail::steady;
namespace d = sqllock::detail;

namespace {
/// Holds the client's deadline thread up, as a descheduled thread would be: a lease whose on_lost
/// blocks until `*go` (at most 10 s). The lease, once the thread is held; nullopt if it never was.
/// `go` is shared with the callback: the test may end while the callback still looks at it.
std::optional<sqllock::lease_guard> hold_up_deadline_thread(sqllock::client& c,
                                                            const std::shared_ptr<std::atomic<bool>>& go) {
  auto stalled = std::make_shared<std::atomic<bool>>(false);
  auto stall = c.try_acquire("stall", {.ttl = 100ms, .auto_renew = false, .on_lost = [stalled, go](const std::string&, std::int64_t) {
                                         *stalled = true;
                                         const auto until = steady::now() + 10s;
                                         while (!*go && steady::now() < until) std::this_thread::sleep_for(5ms);
                                       }});
  if (!stall || !sqllock_testing::eventually([&] { return stalled->load(); }, 5s)) return std::nullopt;
  return stall;
}
}  // namespace

// A term whose lease would be past its safe point when acquired (its acquire is answered 150 ms
// after it started, its max_hold is 100 ms) must not be a leadership, also while the client's
// deadline thread is late (here: held up by another lease's on_lost, as a descheduled thread would
// be). The latch decided it was elected on !lost(), which waits for that thread: on_elected fired
// for such a term with its token. It now checks usable(), and the engine no longer hands out a
// lease answered past its max_hold (it throws lease_lost: EngineLate.ATryAnsweredAfterItsMaxHold*,
// the latch tries again after retry_delay): no term leads until the answers come in time, and the
// first leadership is the lease the latch holds then.
TEST(LeaderLatch, ALeasePastItsSafePointIsNoLeadershipWhileTheDeadlineThreadIsLate) {
  auto db = std::make_shared<d::fake_database>();
  auto backend = std::make_unique<d::fake_backend>(db);
  auto* fake = backend.get();
  auto c = d::client_access::make(std::move(backend), {.require_schema = false});

  const auto go = std::make_shared<std::atomic<bool>>(false);
  auto stall = hold_up_deadline_thread(c, go);
  ASSERT_TRUE(stall) << "the deadline thread was never held up";

  fake->delay_answer(d::fake_op::acquire, 150ms);
  std::mutex mu;
  std::vector<std::int64_t> elected;
  sqllock::leader_latch_options o;
  o.lease = {.ttl = 30s, .max_hold = 100ms};
  o.on_elected = [&](std::int64_t token) {
    std::lock_guard lk(mu);
    elected.push_back(token);
  };
  o.retry_delay = 10ms;
  sqllock::leader_latch latch(c, "election", o);
  // Every acquire is answered 150 ms after it started: no lease is ever usable.
  EXPECT_FALSE(latch.await_leadership(600ms)) << "elected on a lease 50 ms past its max_hold";
  {
    std::lock_guard lk(mu);
    EXPECT_TRUE(elected.empty()) << "on_elected was called for a term whose lease was past its max_hold";
  }
  fake->heal(d::fake_op::acquire);
  *go = true;  // the deadline thread runs again
  ASSERT_TRUE(latch.await_leadership(5s)) << "no leadership once acquires were answered in time";
  const auto held = c.inspect("election");
  ASSERT_TRUE(held);
  const auto token = latch.fencing_token();
  latch.close();
  std::lock_guard lk(mu);
  ASSERT_FALSE(elected.empty());
  EXPECT_EQ(elected.front(), token) << "the first leadership was not the term that leads now";
  EXPECT_EQ(elected.front(), held->fencing_token);
}

// A leader whose lease passes its max_hold (or loss point) while the client's deadline thread is
// late: on_revoked has not run yet, but is_leader(), fencing_token() and await_leadership() must
// not say it leads; they followed on_elected / on_revoked only, so a caller checking is_leader()
// before acting acted on a lease past its safe point.
TEST(LeaderLatch, IsLeaderIsFalsePastTheLeasesSafePointBeforeTheLossIsReported) {
  auto db = std::make_shared<d::fake_database>();
  auto c = d::client_access::make(std::make_unique<d::fake_backend>(db), {.require_schema = false});

  const auto go = std::make_shared<std::atomic<bool>>(false);
  auto stall = hold_up_deadline_thread(c, go);
  ASSERT_TRUE(stall) << "the deadline thread was never held up";

  std::atomic<steady::rep> elected_at{0};
  std::atomic<int> revoked{0};
  sqllock::leader_latch_options o;
  o.lease = {.ttl = 30s, .max_hold = 300ms};
  o.on_elected = [&](std::int64_t) { elected_at = steady::now().time_since_epoch().count(); };
  o.on_revoked = [&](std::int64_t, sqllock::leadership_end) { ++revoked; };
  sqllock::leader_latch latch(c, "election", o);
  ASSERT_TRUE(latch.await_leadership(5s));
  EXPECT_GT(latch.fencing_token(), 0);
  // The term's lease started before on_elected ran: 350 ms after that it is past its max_hold.
  std::this_thread::sleep_until(steady::time_point(steady::duration(elected_at.load())) + 350ms);
  ASSERT_EQ(revoked.load(), 0) << "the deadline thread was not held up after all";
  EXPECT_FALSE(latch.is_leader()) << "is_leader() 50 ms past the lease's max_hold";
  EXPECT_EQ(latch.fencing_token(), 0);
  EXPECT_FALSE(latch.await_leadership(0ms));
  *go = true;
  EXPECT_TRUE(sqllock_testing::eventually([&] { return revoked.load() > 0; }, 5s)) << "the loss was never reported";
}

// Once the term's lease is past its loss point, is_leader() is false for good in that term. A
// renewal sent before the loss point but answered after it, while the client's deadline thread
// (which would have reported the loss at that point and dropped the late answer) is held up,
// moved the lease's valid_until on: usable(), and with it is_leader(), turned true again for the
// same term. The book now applies its own rule to such an answer: past the loss point the lease
// is lost, whatever a renewal answers afterwards.
TEST(LeaderLatch, IsLeaderStaysFalseForTheTermOnceItsLeaseWasPastItsLossPoint) {
  auto db = std::make_shared<d::fake_database>();
  auto backend = std::make_unique<d::fake_backend>(db);
  auto* fake = backend.get();
  auto c = d::client_access::make(std::move(backend), {.require_schema = false});

  const auto go = std::make_shared<std::atomic<bool>>(false);
  auto stall = hold_up_deadline_thread(c, go);
  ASSERT_TRUE(stall) << "the deadline thread was never held up";

  std::atomic<steady::rep> elected_at{0};
  sqllock::leader_latch_options o;
  o.lease = {.ttl = 3s};  // loss point 2820 ms after the acquire began; renewed from 1000 ms
  o.on_elected = [&](std::int64_t) { elected_at = steady::now().time_since_epoch().count(); };
  sqllock::leader_latch latch(c, "election", o);
  ASSERT_TRUE(latch.await_leadership(5s));
  const auto first_term = latch.fencing_token();
  fake->delay_answer(d::fake_op::renew, 2000ms);  // the first renewal answers about 3000 ms in
  const auto elected = steady::time_point(steady::duration(elected_at.load()));
  std::this_thread::sleep_until(elected + 2900ms);
  EXPECT_FALSE(latch.is_leader()) << "is_leader() past the lease's loss point";
  std::this_thread::sleep_until(elected + 3400ms);  // the renewal has answered (matched)
  // A new term (its lease taken after the lost one was released) may lead by now: not this one.
  const auto token = latch.fencing_token();
  EXPECT_NE(token, first_term) << "is_leader() turned true again for the term whose lease was past its loss point";
  fake->heal(d::fake_op::renew);
  *go = true;
}

// is_leader() is true between on_elected and on_revoked (leader.hpp): a caller that sees it true
// may rely on what on_elected set up for the term. The latch published `leading` (and with it
// is_leader() and fencing_token()) before it called on_elected, so a caller polling is_leader()
// acted for a term whose on_elected had not run yet (CI: Leader.ALostLeaseIsReportedToTheLatchInTime
// saw the second term lead with one on_elected call).
TEST(LeaderLatch, IsLeaderTurnsTrueOnlyOnceOnElectedHasReturned) {
  auto db = std::make_shared<d::fake_database>();
  auto c = d::client_access::make(std::make_unique<d::fake_backend>(db), {.require_schema = false});

  std::atomic<bool> in_elected{false};
  std::atomic<bool> go{false};
  std::atomic<std::int64_t> elected_token{0};
  sqllock::leader_latch_options o;
  o.lease = {.ttl = 30s};
  o.on_elected = [&](std::int64_t token) {
    in_elected = true;
    const auto until = steady::now() + 10s;
    while (!go && steady::now() < until) std::this_thread::sleep_for(5ms);
    elected_token = token;
  };
  sqllock::leader_latch latch(c, "election", o);
  ASSERT_TRUE(sqllock_testing::eventually([&] { return in_elected.load(); }, 5s)) << "never elected";
  EXPECT_FALSE(latch.is_leader()) << "is_leader() while on_elected has not returned";
  EXPECT_EQ(latch.fencing_token(), 0) << "a term's token while its on_elected has not returned";
  go = true;
  ASSERT_TRUE(latch.await_leadership(5s));
  EXPECT_TRUE(latch.is_leader());
  EXPECT_GT(elected_token.load(), 0);
  EXPECT_EQ(latch.fencing_token(), elected_token.load());
}

// await_leadership(timeout) waits up to `timeout` (leader.hpp). The latch held its mutex while a
// callback ran, and await_leadership waits on that mutex: it came back only when the callback
// returned (995 ms for a 50 ms timeout while on_elected took a second).
TEST(LeaderLatch, AwaitLeadershipKeepsItsTimeoutWhileACallbackRuns) {
  auto db = std::make_shared<d::fake_database>();
  auto c = d::client_access::make(std::make_unique<d::fake_backend>(db), {.require_schema = false});

  std::atomic<bool> in_elected{false};
  std::atomic<bool> go{false};
  sqllock::leader_latch_options o;
  o.lease = {.ttl = 30s};
  o.on_elected = [&](std::int64_t) {
    in_elected = true;
    const auto until = steady::now() + 10s;
    while (!go && steady::now() < until) std::this_thread::sleep_for(5ms);
  };
  sqllock::leader_latch latch(c, "election", o);
  ASSERT_TRUE(sqllock_testing::eventually([&] { return in_elected.load(); }, 5s)) << "never elected";
  const auto t0 = steady::now();
  EXPECT_FALSE(latch.await_leadership(50ms)) << "leads while on_elected has not returned";
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0);
  go = true;
  EXPECT_LT(took, 2s) << "await_leadership(50ms) came back after " << took.count() << " ms";
  EXPECT_TRUE(latch.await_leadership(5s));
}
