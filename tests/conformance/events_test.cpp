// Conformance: lease events (client_options::on_event) on a real database.
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
  auto g = a.try_acquire(name, {.ttl = 300ms});
  ASSERT_TRUE(g);
  ASSERT_TRUE(b.force_release(name));
  auto h = b.try_acquire(name);
  ASSERT_TRUE(h);
  const auto start = clock::now();
  while (!g->lost() && ms_since(start) < 3000) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(g->lost());
  auto seen = log.of(name);
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen[0].kind, sqllock::event_kind::acquired);
  EXPECT_EQ(seen[1].kind, sqllock::event_kind::lost);
  EXPECT_EQ(seen[1].token, g->fencing_token());
}
