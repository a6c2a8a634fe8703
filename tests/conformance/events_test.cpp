// Conformance: lease events (client_options::on_event) on a real database.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "conformance/fixture.hpp"

using namespace std::chrono_literals;
using namespace sqllock_test;

namespace {
struct copied_event {
  sqllock::event_kind kind;
  std::string backend, name;
  std::int64_t token;
  std::chrono::milliseconds waited, held;
};
struct event_log {
  std::mutex mu;
  std::vector<copied_event> events;
  sqllock::client_options options() {
    sqllock::client_options o;
    o.on_event = [this](const sqllock::lease_event& e) {
      std::lock_guard lk(mu);
      events.push_back({e.kind, std::string(e.backend), std::string(e.name), e.fencing_token, e.waited, e.held});
    };
    return o;
  }
  /// The events of one name, renewals left out (their number depends on timing).
  std::vector<copied_event> of(const std::string& name) {
    std::lock_guard lk(mu);
    std::vector<copied_event> out;
    for (const auto& e : events)
      if (e.name == name && e.kind != sqllock::event_kind::renewed) out.push_back(e);
    return out;
  }
  bool told_lost(const std::string& name) {
    std::lock_guard lk(mu);
    return std::any_of(events.begin(), events.end(),
                       [&](const copied_event& e) { return e.name == name && e.kind == sqllock::event_kind::lost; });
  }
};
}  // namespace

TEST(Events, AcquiredAndReleasedCarryTheBackendTokenAndTimes) {
  event_log log;
  auto a = make_client(log.options());
  auto name = unique_name("ev");
  auto g = a.acquire_for(name, 5s, {.ttl = 30s});
  std::this_thread::sleep_for(30ms);
  const auto token = g.fencing_token();
  g.release();
  auto seen = log.of(name);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].kind, sqllock::event_kind::acquired);
  EXPECT_EQ(seen[1].kind, sqllock::event_kind::released);
  EXPECT_EQ(seen[0].backend, hooks().name);
  EXPECT_EQ(seen[0].token, token);
  EXPECT_EQ(seen[1].token, token);
  EXPECT_GE(seen[1].held, 30ms);
}

TEST(Events, ALeaseTakenOverIsReportedLost) {
  event_log log;
  auto a = make_client(log.options());
  auto b = make_client();
  auto name = unique_name("ev_lost");
  // 1 s, not less: the acquire must answer within 950 ms (under ThreadSanitizer on a busy machine
  // a 300 ms lease's first statement did not).
  auto g = a.try_acquire(name, {.ttl = 1s});
  ASSERT_TRUE(g);
  ASSERT_TRUE(b.force_release(name));
  auto h = b.try_acquire(name);
  ASSERT_TRUE(h);
  const auto start = clock::now();
  while (!g->lost() && ms_since(start) < 3000) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(g->lost());
  // lost() is set under the lease book's lock; the deciding thread tells the event right after it
  // lets go of that lock (README: hooks never run under a lock of sqllock's), so the event may
  // trail lost() by a moment: under AddressSanitizer the check below once ran first and saw only
  // `acquired`.
  ASSERT_TRUE(eventually([&] { return log.told_lost(name); }, 2s)) << "lost() is true but no lost event was told within 2 s";
  // The renewal that finds the takeover reports the loss at once; when it is not answered before a
  // third of the TTL is left (the watchdog's first renewal opens its own connection, which under
  // ThreadSanitizer took longer than that), the lease is reported at risk first and lost at its
  // local deadline: "reported lost (lost(), on_lost; on_at_risk first)" (README). A failed renewal
  // is a statement_error event; neither is part of the story asserted here, their order is.
  auto seen = log.of(name);
  std::erase_if(seen, [](const copied_event& e) { return e.kind == sqllock::event_kind::statement_error; });
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen[0].kind, sqllock::event_kind::acquired);
  const std::size_t at = seen[1].kind == sqllock::event_kind::at_risk ? 2 : 1;
  ASSERT_EQ(seen.size(), at + 1) << "expected acquired, [at_risk], lost and nothing else";
  EXPECT_EQ(seen[at].kind, sqllock::event_kind::lost);
  EXPECT_EQ(seen[at].token, g->fencing_token());
}
