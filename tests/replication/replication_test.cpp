// PostgreSQL streaming replication and failover (scripts/postgresql-replica.sh): each test starts
// its own primary + standby on loopback, kills the primary with SIGKILL mid-run and promotes the
// standby, while clients use the multi-host URL (target_session_attrs=read-write).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "common/test_support.hpp"
#include "sqllock/sqllock.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

long long ms_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

/// One primary + standby pair, started by the project's script in a directory of its own.
class replica_pair {
 public:
  explicit replica_pair(const std::string& mode) {
    char tmpl[] = "/tmp/sqllock-replica.XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    ::chmod(tmpl, 0755);  // the servers run as another user when the tests run as root
    run("start " + dir_ + "/pair " + mode);
    std::ifstream env(dir_ + "/pair/env.sh");
    std::string line;
    while (std::getline(env, line)) {
      const auto eq = line.find('=');
      if (line.rfind("export ", 0) != 0 || eq == std::string::npos) continue;
      std::string key = line.substr(7, eq - 7), value = line.substr(eq + 1);
      if (value.size() >= 2 && value.front() == '\'') value = value.substr(1, value.size() - 2);
      vars_[key] = value;
    }
  }
  ~replica_pair() {
    std::string cmd = std::string(SQLLOCK_REPLICA_SCRIPT) + " stop " + dir_ + "/pair >/dev/null 2>&1; rmdir " + dir_;
    (void)std::system(cmd.c_str());
  }
  std::string url() const { return vars_.at("SQLLOCK_TEST_REPLICA_URL"); }
  void run(const std::string& args) const {
    const std::string cmd = std::string(SQLLOCK_REPLICA_SCRIPT) + " " + args;
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  }
  void crash_primary() const { run("crash-primary " + dir_ + "/pair"); }
  void detach_standby() const { run("detach-standby " + dir_ + "/pair"); }
  void promote() const { run("promote " + dir_ + "/pair"); }

 private:
  std::string dir_;
  std::map<std::string, std::string> vars_;
};

/// A client on the new primary: right after promotion a connection attempt may still find no
/// read-write server; tried again for up to 20 s.
sqllock::client connect_after_failover(const std::string& url) {
  const auto until = clock_type::now() + 20s;
  for (;;) {
    try {
      return sqllock::connect(url);
    } catch (const sqllock::connection_lost& e) {
      if (clock_type::now() > until) throw;
      std::cout << "[ NOTE     ] connecting after failover: " << e.what() << "; again\n";
      std::this_thread::sleep_for(200ms);
    }
  }
}

struct held_lease {
  std::string name;
  sqllock::lease_guard guard;
  std::atomic<clock_type::rep> lost_at{0};
};

// A synchronous standby (synchronous_commit = remote_apply): every acquisition acknowledged before
// the primary dies is on the standby. Holders keep their leases or are told in time, waiters
// finish after the failover, tokens keep increasing.
TEST(replication, SyncStandbyFailoverLosesNoAcknowledgedAcquisition) {
  replica_pair pair("sync");
  const auto url = pair.url();
  ASSERT_EQ(sqllock_testing::prepare_database(url, "replication_tests"), 0);
  constexpr int names = 3;
  const auto ttl = 10000ms;  // longer than the failover takes on a loaded machine (about 4 s)

  // Holders: one lease per name, each on its own client.
  std::vector<sqllock::client> holder_clients;
  std::vector<std::unique_ptr<held_lease>> held;
  for (int i = 0; i < names; ++i) {
    holder_clients.push_back(sqllock::connect(url));
    auto h = std::make_unique<held_lease>();
    h->name = sqllock_testing::unique_name("failover_sync");
    sqllock::lease_options o;
    o.ttl = ttl;
    auto* raw = h.get();
    o.on_lost = [raw](const std::string&, std::int64_t) { raw->lost_at = clock_type::now().time_since_epoch().count(); };
    h->guard = holder_clients.back().acquire_for(h->name, 10s, o);
    held.push_back(std::move(h));
  }
  // Churn: acquisitions acknowledged right up to the crash, on names of their own.
  std::atomic<bool> stop_churn{false};
  std::mutex churn_mutex;
  std::map<std::string, std::int64_t> churn_last;  // name -> last acknowledged token
  std::jthread churn([&] {
    auto c = sqllock::connect(url);
    std::vector<std::string> churn_names;
    for (int i = 0; i < 2; ++i) churn_names.push_back(sqllock_testing::unique_name("failover_churn"));
    sqllock::lease_options o;
    o.ttl = 2s;  // a release whose answer the crash cut off leaves the row held this long
    o.auto_renew = false;
    for (int i = 0; !stop_churn; ++i) {
      const auto& n = churn_names[static_cast<std::size_t>(i) % churn_names.size()];
      try {
        auto g = c.try_acquire(n, o);
        if (!g) continue;
        {
          std::lock_guard lk(churn_mutex);
          churn_last[n] = g->fencing_token();
        }
        g->release();
      } catch (const sqllock::error&) {
        break;  // the primary is gone: whatever was acknowledged is recorded
      }
    }
  });
  // Waiters: one per held name, on clients of their own, waiting for the holder.
  struct waiter_result {
    std::int64_t token = 0;
    clock_type::time_point at{};
    std::string error;
  };
  std::vector<waiter_result> results(names);
  std::vector<std::jthread> waiters;
  for (int i = 0; i < names; ++i) {
    waiters.emplace_back([&, i] {
      try {
        auto c = sqllock::connect(url);
        sqllock::lease_options o;
        o.ttl = 5s;
        auto g = c.acquire_for(held[static_cast<std::size_t>(i)]->name, 60s, o);
        results[static_cast<std::size_t>(i)].at = clock_type::now();
        results[static_cast<std::size_t>(i)].token = g.fencing_token();
        g.release();
      } catch (const std::exception& e) {
        results[static_cast<std::size_t>(i)].error = e.what();
      }
    });
  }
  std::this_thread::sleep_for(1500ms);  // renewals went through, waiters wait, churn churns

  const auto crash_at = clock_type::now();
  pair.crash_primary();
  stop_churn = true;
  churn.join();
  pair.promote();
  const auto promoted_at = clock_type::now();
  std::cout << "[ NOTE     ] primary killed; standby promoted " << ms_between(crash_at, promoted_at) << " ms later\n";

  // Nothing acknowledged was lost: the holders' rows and the last churn tokens are on the new primary.
  auto observer = connect_after_failover(url);
  for (auto& h : held) {
    auto info = observer.inspect(h->name);
    EXPECT_TRUE(info.has_value()) << h->name << ": the acknowledged acquisition is missing after failover";
    if (info) EXPECT_EQ(info->fencing_token, h->guard.fencing_token()) << h->name;
  }
  {
    std::lock_guard lk(churn_mutex);
    EXPECT_FALSE(churn_last.empty());
    for (auto& [n, token] : churn_last) {
      sqllock::lease_options o;
      o.ttl = 5s;
      auto g = observer.acquire_for(n, 15s, o);
      EXPECT_GT(g.fencing_token(), token) << n << ": a token acknowledged before the failover was handed out again";
      g.release();
    }
  }
  // Holders that still hold their lease (renewed on the new primary) release it; a holder told it
  // lost its lease does nothing more.
  std::this_thread::sleep_for(1500ms);
  std::vector<bool> released(names, false);
  for (int i = 0; i < names; ++i) {
    auto& h = *held[static_cast<std::size_t>(i)];
    if (h.guard.lost()) continue;
    EXPECT_NO_THROW(h.guard.release()) << h.name << ": a lease renewed after failover was not the holder's";
    released[static_cast<std::size_t>(i)] = true;
  }
  for (auto& t : waiters) t.join();
  for (int i = 0; i < names; ++i) {
    const auto& h = *held[static_cast<std::size_t>(i)];
    const auto& r = results[static_cast<std::size_t>(i)];
    ASSERT_TRUE(r.error.empty()) << h.name << ": the waiter failed: " << r.error;
    EXPECT_GT(r.token, h.guard.fencing_token()) << h.name;
    if (released[static_cast<std::size_t>(i)]) {
      std::cout << "[ NOTE     ] " << h.name << ": holder kept its lease across the failover and released it; waiter "
                << "acquired " << ms_between(crash_at, r.at) << " ms after the crash, token " << h.guard.fencing_token()
                << " -> " << r.token << "\n";
      continue;
    }
    // The waiter got the name: by then the holder was told (never later than a takeover).
    ASSERT_NE(h.lost_at.load(), 0) << h.name << ": lost() without on_lost";
    const auto lost = clock_type::time_point(clock_type::duration(h.lost_at.load()));
    std::cout << "[ NOTE     ] " << h.name << ": holder told lost " << ms_between(crash_at, lost)
              << " ms after the crash; waiter acquired " << ms_between(crash_at, r.at) << " ms after, token "
              << h.guard.fencing_token() << " -> " << r.token << "\n";
    EXPECT_LE(ms_between(lost, r.at), ms_between(crash_at, r.at)) << "sanity";
    EXPECT_GE(ms_between(lost, r.at), 0) << h.name << ": the waiter acquired before the holder was told";
  }
}

// An asynchronous standby that had not received the last acquisition when the primary died: the
// promoted standby does not know it. The next acquisition of that name, by a client that never saw
// the old primary, must get a token past the lost one (not the same token a second time), and the
// old holder must be told it lost its lease.
TEST(replication, AsyncStandbyFailoverNeverReusesAToken) {
  replica_pair pair("async");
  const auto url = pair.url();
  ASSERT_EQ(sqllock_testing::prepare_database(url, "replication_tests"), 0);
  const auto name = sqllock_testing::unique_name("failover_async");
  const auto ttl = 3000ms;

  auto a = sqllock::connect(url);
  {
    // One acquisition the standby does receive (the row exists there with its token).
    sqllock::lease_options o;
    o.ttl = ttl;
    auto g = a.acquire_for(name, 10s, o);
    g.release();
  }
  std::this_thread::sleep_for(1000ms);  // replayed by the standby (async, idle: well under a second)
  pair.detach_standby();

  std::atomic<clock_type::rep> lost_at{0};
  sqllock::lease_options o;
  o.ttl = ttl;
  o.on_lost = [&](const std::string&, std::int64_t) { lost_at = clock_type::now().time_since_epoch().count(); };
  auto held = a.acquire_for(name, 10s, o);  // acknowledged by the primary, never sent to the standby
  const auto token_a = held.fencing_token();
  std::this_thread::sleep_for(300ms);

  const auto crash_at = clock_type::now();
  pair.crash_primary();
  pair.promote();

  auto b = connect_after_failover(url);  // a client that never saw the old primary
  sqllock::lease_options ob;
  ob.ttl = ttl;
  auto g = b.acquire_for(name, 10s, ob);
  const auto token_b = g.fencing_token();
  const auto b_at = clock_type::now();
  std::cout << "[ NOTE     ] old primary granted token " << token_a << " (never replicated); after promotion a new client got "
            << token_b << " " << ms_between(crash_at, b_at) << " ms after the crash; old holder "
            << (held.lost() ? "already told lost" : "still believes it holds the lease") << "\n";
  EXPECT_GT(token_b, token_a) << "token " << token_a << " was handed out twice (double grant)";

  // The old holder is told at its next renewal (about a third of the TTL), not at its expiry.
  const auto deadline = b_at + ttl;
  while (lost_at.load() == 0 && clock_type::now() < deadline) std::this_thread::sleep_for(10ms);
  ASSERT_NE(lost_at.load(), 0) << "the old holder was never told it lost its lease";
  const auto lost = clock_type::time_point(clock_type::duration(lost_at.load()));
  std::cout << "[ NOTE     ] old holder told lost " << ms_between(crash_at, lost) << " ms after the crash\n";
  g.release();
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
