// Safety: a guarded transaction holds takeovers off without starving the client's other leases.
#include <thread>

#include "safety/safety_fixture.hpp"

using namespace std::chrono_literals;
using namespace sqllock_safety;

// A transaction guarding lease X stays open for more than twice the TTL. The client's other lease
// Y keeps being renewed (the watchdog never waits on X's row, nor lets Y's batch wait on it).
// PostgreSQL renews X as well (its guard does not hold plain UPDATEs off); on MariaDB X is left out
// of renewals while guarded, and nobody could have taken it over meanwhile anyway.
TEST(Guard, AGuardedTransactionDoesNotStarveOtherLeases) {
  auto a = make_client();
  auto b = make_client();
  const auto x = unique_name("guarded_x");
  const auto y = unique_name("other_y");
  auto gx = a.try_acquire(x, {.ttl = 600ms});
  auto gy = a.try_acquire(y, {.ttl = 600ms});
  ASSERT_TRUE(gx && gy);
  {
    auto tx = a.begin();
    tx.require_lease(*gx);
    std::this_thread::sleep_for(1500ms);
    EXPECT_FALSE(gy->lost()) << "a guarded transaction on another lease starved this one's renewals";
    EXPECT_FALSE(b.try_acquire(y));
    EXPECT_FALSE(b.try_acquire_for(x, 200ms)) << "a lease was taken over while a transaction guarded it";
    if (hooks().name == "postgresql") EXPECT_FALSE(gx->lost());
    tx.commit();
  }
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(gy->lost());
}
