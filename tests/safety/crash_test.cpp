// Safety: what a server crash may not undo (issue 10 items 1 and 6).
#include <thread>

#include "safety/safety_fixture.hpp"

using namespace std::chrono_literals;
using namespace sqllock_safety;

namespace {

// The server flushes lazily by default for the duration of a test (PostgreSQL synchronous_commit =
// off; MariaDB keeps innodb_flush_log_at_trx_commit = 1, which sqllock requires).
struct lazy_server_default {
  lazy_server_default() {
    if (hooks().name == "postgresql") {
      hooks().admin("ALTER SYSTEM SET synchronous_commit = off");
      hooks().admin("SELECT pg_reload_conf()");
    }
  }
  ~lazy_server_default() {
    if (hooks().name == "postgresql") {
      hooks().admin("ALTER SYSTEM RESET synchronous_commit");
      hooks().admin("SELECT pg_reload_conf()");
    }
  }
};

}  // namespace

// Item 1: PostgreSQL committed releases with synchronous_commit = off; a crash right after an
// acknowledged release brought the row back naming the same holder, and the same client's next
// acquire became a "re-entry": same token, hold count 2, and one hold left behind its release.
TEST(Crash, AnAcknowledgedReleaseSurvivesACrashAndTheNextTokenIsGreater) {
  lazy_server_default lazy;
  auto c = make_client();
  const auto name = unique_name("crash_release");
  std::int64_t highest = 0;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto g = c.acquire_for(name, 20s, {.ttl = 60s});
    EXPECT_GT(g.fencing_token(), highest) << "a token was handed out again after a crash";
    highest = std::max(highest, g.fencing_token());
    g.release();
    crash_server();
    // The release was durable: the lock is free at once, not held until the 60 s lease expires.
    auto h = c.acquire_for(name, 20s, {.ttl = 60s});
    EXPECT_GT(h.fencing_token(), highest);
    EXPECT_EQ(h.hold_count(), 1);
    highest = std::max(highest, h.fencing_token());
    h.release();
    auto info = c.inspect(name);
    EXPECT_FALSE(info) << "a hold was left behind: " << (info ? info->holder : "");
  }
}

// The same for an acquisition: once acquire returned, a crash never hands its token out again.
TEST(Crash, AnAcknowledgedAcquisitionSurvivesACrash) {
  lazy_server_default lazy;
  auto a = make_client();
  const auto name = unique_name("crash_acquire");
  auto g = a.acquire_for(name, 20s, {.ttl = 60s, .auto_renew = false});
  const auto token = g.fencing_token();
  crash_server();
  auto b = make_client();
  EXPECT_FALSE(b.try_acquire(name)) << "the acquisition was lost in the crash";
  auto info = b.inspect(name);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->fencing_token, token);
  EXPECT_EQ(info->owner, g.owner_id());
  g.release();
  auto h = b.try_acquire(name);
  ASSERT_TRUE(h);
  EXPECT_GT(h->fencing_token(), token);
}
