// When `run` stops CMD on a lease that is not renewed (cli/lease_timing.hpp): pure arithmetic, no
// process or database.
#include <gtest/gtest.h>

#include <chrono>

#include "lease_timing.hpp"

using namespace std::chrono_literals;
using std::chrono::milliseconds;

// SIGKILL must reach CMD before the lease can end in the database. The database computes the
// expiry on its own clock, which the library assumes may run up to 1% faster than this process's
// monotonic clock (its loss margin keeps TTL/100 uncapped for that, docs/internals.md): the lease
// may end TTL/100 before valid_until. On top, the same scheduling allowance as the library's loss
// point (TTL/20, at most 500 ms). With TTL/10 capped at 1 s alone, a 5-minute lease on a server
// clock 1% fast ended 3 s before valid_until, and CMD was killed 2 s after that: a next holder
// could run beside it.
TEST(RunTiming, SigkillComesBeforeTheLeaseEndsOnADatabaseClockOnePercentFast) {
  for (const milliseconds ttl : {1ms, 100ms, 1000ms, 10'000ms, 30'000ms, 60'000ms, 120'000ms, 300'000ms, 3'600'000ms}) {
    for (const milliseconds grace : {0ms, 1000ms, 10'000ms}) {
      const auto t = sqllock_cli::lease_timing_for(ttl, grace);
      const auto db_end_before_valid_until = ttl / 100;       // on a database clock 1% fast
      const auto scheduling = std::min(ttl / 20, milliseconds(500));
      EXPECT_GE(t.kill_margin, db_end_before_valid_until + scheduling)
          << "--ttl " << ttl.count() << " ms: SIGKILL " << t.kill_margin.count()
          << " ms before valid_until, the lease may end " << db_end_before_valid_until.count() << " ms before it";
      // A healthy lease (renewed every third of its TTL) is never stopped.
      EXPECT_LE(t.kill_margin + t.term_lead, std::max(ttl / 3, t.kill_margin)) << "--ttl " << ttl.count() << " ms";
      EXPECT_LT(t.kill_margin, ttl / 3 + 1ms) << "--ttl " << ttl.count() << " ms";
    }
  }
}
