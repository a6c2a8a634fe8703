// Against a 3-node MariaDB Galera cluster (scripts/galera-cluster.sh): contenders on different nodes,
// certification conflicts, a node killed and brought back. A missing SQLLOCK_TEST_GALERA_URL1..3
// fails every test.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/test_support.hpp"
#include "sqllock/sqllock.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

std::string env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v ? v : "";
}
std::string node_url(int n) { return env("SQLLOCK_TEST_GALERA_URL" + std::to_string(n)); }
std::string admin_url(int n) { return env("SQLLOCK_TEST_GALERA_ADMIN_URL" + std::to_string(n)); }

/// An administrative connection to node n; it must work whatever the node's flush setting (the
/// durability test changes it), so the risk is accepted here.
sqllock::client admin(int n) {
  sqllock::client_options o;
  o.allow_unsafe_durability = true;
  return sqllock::connect(admin_url(n), o);
}

long long ms_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

/// Certification failures counted by node n since it started (wsrep_local_cert_failures) plus
/// local transactions aborted by replicated ones (wsrep_local_bf_aborts).
long long conflicts_on(int n) {
  auto a = admin(n);
  auto tx = a.begin();
  long long sum = 0;
  for (const auto& r : tx.query("SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_cert_failures', "
                                "'wsrep_local_bf_aborts')")) {
    sum += std::stoll(r.as_text(1));
  }
  tx.commit();
  return sum;
}

void set_retry_autocommit(int value) {
  for (int n = 1; n <= 3; ++n) {
    auto a = admin(n);
    auto tx = a.begin();
    tx.execute("SET GLOBAL wsrep_retry_autocommit = " + std::to_string(value));
    tx.commit();
  }
}

class galera : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int n = 1; n <= 3; ++n) {
      ASSERT_FALSE(node_url(n).empty()) << "SQLLOCK_TEST_GALERA_URL" << n
                                        << " is not set; start the cluster with scripts/galera-cluster.sh "
                                           "(a failure, not a skip)";
    }
  }
};

// GET_LOCK is local to a node, so a release on one node cannot wake a waiter through it on another.
// A waiter whose safety-net polling is slow (poll_max 3 s) must still take the lock within a small
// fraction of that after a holder on another node releases it.
TEST_F(galera, AReleaseOnOneNodeWakesAWaiterOnAnotherNodeQuickly) {
  sqllock::client_options slow_poll;
  slow_poll.poll_max = 3000ms;
  for (const auto& [from, to] : {std::pair{1, 2}, std::pair{2, 3}, std::pair{3, 1}}) {
    const auto name = sqllock_testing::unique_name("galera_wake");
    auto holder = sqllock::connect(node_url(from));
    auto waiter = sqllock::connect(node_url(to), slow_poll);
    auto g = holder.acquire_for(name, 5s);
    std::atomic<clock_type::rep> got_at{0};
    std::thread t([&] {
      auto w = waiter.acquire_for(name, 10s);
      got_at = clock_type::now().time_since_epoch().count();
      EXPECT_GT(w.fencing_token(), g.fencing_token());
    });
    std::this_thread::sleep_for(400ms);  // the waiter has tried once and waits
    const auto released = clock_type::now();
    g.release();
    t.join();
    const auto latency = ms_between(released, clock_type::time_point(clock_type::duration(got_at.load())));
    std::cout << "hand-off node " << from << " -> node " << to << ": " << latency << " ms\n";
    EXPECT_LT(latency, 700) << "the waiter on node " << to << " took the lock " << latency
                            << " ms after the release on node " << from << " (its polling alone: up to 3000 ms)";
  }
}

// The same new name acquired at the same moment on all three nodes: each node's upsert succeeds
// locally, certification lets the first write set through and rejects the others (error 1213 at
// commit). None may see an error, and exactly one may hold the name. The server's own retry of
// autocommit statements (wsrep_retry_autocommit) is turned off for the test, so the conflicts reach
// the client.
TEST_F(galera, ConcurrentAcquiresOfOneNameOnThreeNodesNeverErrorAndExactlyOneWins) {
  set_retry_autocommit(0);
  struct restore {
    ~restore() {
      try {
        set_retry_autocommit(1);
      } catch (...) {
      }
    }
  } restore_after;
  long long conflicts_before = 0;
  for (int n = 1; n <= 3; ++n) conflicts_before += conflicts_on(n);

  std::vector<sqllock::client> clients;
  for (int n = 1; n <= 3; ++n) clients.push_back(sqllock::connect(node_url(n)));
  constexpr int rounds = 40;
  int errors = 0;
  for (int round = 0; round < rounds; ++round) {
    const auto name = sqllock_testing::unique_name("galera_cert");
    std::barrier start(3);
    std::vector<std::optional<sqllock::lease_guard>> got(3);
    std::vector<std::string> error(3);
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        try {
          got[i] = clients[i].try_acquire(name);
        } catch (const std::exception& e) {
          error[i] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    int winners = 0;
    for (int i = 0; i < 3; ++i) {
      if (!error[i].empty()) {
        ++errors;
        ADD_FAILURE() << "round " << round << ", node " << i + 1 << ": " << error[i];
      }
      if (got[i]) ++winners;
    }
    EXPECT_EQ(winners, 1) << "round " << round;
    for (auto& g : got) {
      if (g) g->release();
    }
  }
  long long conflicts_after = 0;
  for (int n = 1; n <= 3; ++n) conflicts_after += conflicts_on(n);
  std::cout << rounds << " rounds, " << conflicts_after - conflicts_before << " certification conflicts, " << errors
            << " errors\n";
  EXPECT_GT(conflicts_after - conflicts_before, 0) << "no certification conflict was provoked: nothing was tested";
}

// One name churned (try_acquire, release, again) by two threads on each of the three nodes for
// 3 s, with the server's own retry of autocommit statements off: the row changes every few
// milliseconds, so a node's upsert often loses certification to another node's write several times
// in a row. No call may end in an error, and the holders never overlap.
TEST_F(galera, AHotNameChurnedOnAllNodesNeverMakesAnAcquireOrReleaseFail) {
  set_retry_autocommit(0);
  struct restore {
    ~restore() {
      try {
        set_retry_autocommit(1);
      } catch (...) {
      }
    }
  } restore_after;
  long long conflicts_before = 0;
  for (int n = 1; n <= 3; ++n) conflicts_before += conflicts_on(n);
  const auto name = sqllock_testing::unique_name("galera_hot");
  std::atomic<int> inside{0}, overlaps{0}, acquired{0}, errors{0};
  std::mutex mu;
  std::string first_error;
  const auto until = clock_type::now() + 3s;
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      auto c = sqllock::connect(node_url(i % 3 + 1));
      while (clock_type::now() < until) {
        try {
          auto g = c.try_acquire(name);
          if (!g) continue;
          if (++inside > 1) ++overlaps;
          ++acquired;
          std::this_thread::sleep_for(1ms);
          --inside;
          g->release();
        } catch (const std::exception& e) {
          ++errors;
          std::lock_guard lk(mu);
          if (first_error.empty()) first_error = e.what();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  long long conflicts_after = 0;
  for (int n = 1; n <= 3; ++n) conflicts_after += conflicts_on(n);
  std::cout << acquired << " acquisitions, " << conflicts_after - conflicts_before << " certification conflicts, "
            << errors << " errors\n";
  EXPECT_EQ(errors, 0) << "first: " << first_error;
  EXPECT_EQ(overlaps, 0);
  EXPECT_GT(acquired, 0);
  EXPECT_GT(conflicts_after - conflicts_before, 0) << "no certification conflict was provoked: nothing was tested";
}

void set_flush(int node, int value) {
  auto a = admin(node);
  auto tx = a.begin();
  tx.execute("SET GLOBAL innodb_flush_log_at_trx_commit = " + std::to_string(value));
  tx.commit();
}

// A commit on a Galera node is acknowledged once its write set reached every node of the primary
// component, so a node flushing its log about once a second (innodb_flush_log_at_trx_commit = 2)
// loses nothing acknowledged in the crash of any one node: accepted. 0 (not even written to the OS
// at commit) is refused as on a single server, naming the setting.
TEST_F(galera, FlushAtTrxCommit2IsAcceptedOnANodeOfTheClusterAnd0IsRefused) {
  struct restore {
    ~restore() {
      try {
        set_flush(2, 1);
      } catch (...) {
      }
    }
  } restore_after;
  set_flush(2, 2);
  {
    auto c = sqllock::connect(node_url(2));
    auto g = c.try_acquire(sqllock_testing::unique_name("galera_flush2"));
    EXPECT_TRUE(g.has_value());
  }
  set_flush(2, 0);
  try {
    auto c = sqllock::connect(node_url(2));
    ADD_FAILURE() << "a node with innodb_flush_log_at_trx_commit = 0 was accepted";
  } catch (const sqllock::database_error& e) {
    EXPECT_NE(std::string(e.what()).find("innodb_flush_log_at_trx_commit = 0"), std::string::npos) << e.what();
  }
}

// The cluster's nodes are started without TLS (scripts/galera-cluster.sh), the single test server
// with it (scripts/mariadb-server.sh, where mysql_tests checks the TLS success paths). So this is
// where the refusal is exercised: ssl-mode=required on a server without TLS is connection_lost
// naming TLS, never a plain-text session that the URL asked not to have.
TEST_F(galera, SslModeRequiredIsRefusedByANodeWithoutTls) {
  {
    auto a = admin(1);
    auto tx = a.begin();
    const auto rows = tx.query("SHOW GLOBAL VARIABLES LIKE 'have_ssl'");
    ASSERT_EQ(rows.size(), 1u);
    ASSERT_NE(rows[0].as_text(1), "YES") << "node 1 offers TLS: this test needs a node without it";
    tx.commit();
  }
  try {
    auto c = sqllock::connect(node_url(1) + "?ssl-mode=required");
    ADD_FAILURE() << "ssl-mode=required connected to a node without TLS";
  } catch (const sqllock::connection_lost& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("TLS") != std::string::npos || what.find("SSL") != std::string::npos) << what;
  }
  auto plain = sqllock::connect(node_url(1) + "?ssl-mode=disabled");
  EXPECT_TRUE(plain.try_acquire(sqllock_testing::unique_name("galera_plain")).has_value());
}

void set_provider_option(int node, const std::string& option) {
  auto a = admin(node);
  auto tx = a.begin();
  tx.execute("SET GLOBAL wsrep_provider_options = '" + option + "'");
  tx.commit();
}

// pc.ignore_sb / pc.ignore_quorum let both halves of a partitioned cluster go on as "Primary" and
// write: each half could grant the same name, with the same next token. Such a node is refused
// (whatever its flush setting), naming the option.
TEST_F(galera, ANodeThatIgnoresSplitBrainOrQuorumIsRefused) {
  for (const std::string option : {"pc.ignore_sb", "pc.ignore_quorum"}) {
    struct restore {
      std::string option;
      ~restore() {
        try {
          set_provider_option(2, option + "=false");
        } catch (...) {
        }
      }
    } restore_after{option};
    set_provider_option(2, option + "=true");
    try {
      auto c = sqllock::connect(node_url(2));
      ADD_FAILURE() << "a node with " << option << " = true was accepted";
    } catch (const sqllock::database_error& e) {
      EXPECT_NE(std::string(e.what()).find(option), std::string::npos) << e.what();
    }
  }
  auto c = sqllock::connect(node_url(2));  // restored: accepted again
  EXPECT_TRUE(c.try_acquire(sqllock_testing::unique_name("galera_sb")).has_value());
}

// Two contenders per node on one name, node 3 killed (kill -9) mid-run and brought back. Exclusion: a
// holder is "inside" from its acquisition until it releases or is told the lease is lost (on_lost,
// which comes no later than another client could take over); two are never inside at once. Token
// order: tokens are strictly increasing in the order the holders entered. Every contender, those on
// the killed node included, holds the lock again after the node is back.
TEST_F(galera, ContendersOnAllNodesKeepExclusionAndTokenOrderAcrossANodeKill) {
  const auto name = sqllock_testing::unique_name("galera_kill");
  const std::string kill = env("SQLLOCK_TEST_GALERA_KILL");
  const std::string start = env("SQLLOCK_TEST_GALERA_START");
  ASSERT_FALSE(kill.empty() || start.empty()) << "SQLLOCK_TEST_GALERA_KILL/START are not set";

  std::mutex mu;
  int inside = 0;
  int overlaps = 0;
  std::vector<std::int64_t> tokens;  // in the order the holders entered
  std::atomic<bool> stop{false};
  std::atomic<bool> node_back{false};
  std::atomic<int> holding_node{0};  // the node of the current holder (0: none)
  std::atomic<bool> killed{false};
  std::atomic<bool> only_node3{false};  // contenders on nodes 1 and 2 hold back (before the kill)
  std::vector<int> after_restart(6, 0);
  // What each contender did after node 3 was back, for a failure's message: calls that returned
  // not-acquired, errors (the last one), ms from node_back to the first hold.
  std::vector<int> misses_after(6, 0), errors_after(6, 0);
  std::vector<long long> first_hold_ms(6, -1);
  std::vector<std::string> last_error(6);
  std::atomic<clock_type::rep> back_at{0};
  std::vector<int> losses(6, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      const int node = i % 3 + 1;
      std::optional<sqllock::client> c;
      while (!stop) {
        if (only_node3 && node != 3) {
          std::this_thread::sleep_for(5ms);
          continue;
        }
        try {
          if (!c) c = sqllock::connect(node_url(node));
          auto left = std::make_shared<std::atomic<bool>>(false);
          auto leave = [&mu, &inside, left] {
            if (left->exchange(true)) return;
            std::lock_guard lk(mu);
            --inside;
          };
          sqllock::lease_options o;
          o.ttl = 2000ms;
          o.on_lost = [&, i, leave](const std::string&, std::int64_t) {
            leave();
            std::lock_guard lk(mu);
            ++losses[i];
          };
          auto g = c->try_acquire_for(name, 1500ms, o);
          if (!g) {
            if (node_back) {
              std::lock_guard lk(mu);
              ++misses_after[i];
            }
            continue;
          }
          {
            std::lock_guard lk(mu);
            if (node_back && first_hold_ms[i] < 0)
              first_hold_ms[i] = ms_between(clock_type::time_point(clock_type::duration(back_at.load())), clock_type::now());
            if (++inside > 1) ++overlaps;
            if (!tokens.empty() && g->fencing_token() <= tokens.back()) {
              ADD_FAILURE() << "token " << g->fencing_token() << " after " << tokens.back();
            }
            tokens.push_back(g->fencing_token());
            holding_node = node;
            if (node_back) ++after_restart[i];
          }
          if (node == 3 && !killed) {
            // Until node 3 is killed, a holder there stays inside until it is told the lease is
            // lost (or the node is back): the kill then lands on a live lease.
            while (!g->lost() && !node_back) std::this_thread::sleep_for(5ms);
          } else {
            std::this_thread::sleep_for(30ms);
          }
          holding_node = 0;
          leave();
          try {
            g->release();
          } catch (const sqllock::error&) {
            // lost or unanswered (its node was killed): the lease expires by its TTL
          }
        } catch (const sqllock::error& e) {
          // Only a contender on the killed node may fail to reach its server.
          if (node != 3) {
            std::lock_guard lk(mu);
            ADD_FAILURE() << "contender " << i << " on node " << node << ": " << e.what();
          } else if (node_back) {
            std::lock_guard lk(mu);
            ++errors_after[i];
            last_error[i] = e.what();
          }
          c.reset();
          std::this_thread::sleep_for(200ms);
        }
      }
    });
  }
  // Kill node 3 while a contender on it holds the lock: its lease must expire there and be taken
  // over on the other nodes, the holder told of the loss first.
  std::this_thread::sleep_for(1s);
  only_node3 = true;  // let a contender on node 3 in (the others would usually win the race)
  for (int i = 0; i < 5000 && holding_node != 3; ++i) std::this_thread::sleep_for(1ms);
  const bool killed_a_holder = holding_node == 3;
  killed = true;
  only_node3 = false;
  ASSERT_EQ(std::system((kill + " 3").c_str()), 0);
  std::this_thread::sleep_for(3s);  // the other two carry on; leases on node 3 expire
  const auto restarting = clock_type::now();
  const int started = std::system((start + " 3 >/dev/null").c_str());
  std::cout << "node 3 back after " << ms_between(restarting, clock_type::now()) << " ms\n";
  back_at = clock_type::now().time_since_epoch().count();
  node_back = true;
  // Until a contender on every node has held once (15 s at most; 2-4 s is usual for node 3).
  const auto until = clock_type::now() + 15s;
  for (;;) {
    std::this_thread::sleep_for(200ms);
    std::lock_guard lk(mu);
    bool all = true;
    for (int node = 0; node < 3; ++node) all = all && after_restart[node] + after_restart[node + 3] > 0;
    if (all || clock_type::now() > until) break;
  }
  stop = true;
  for (auto& t : threads) t.join();
  ASSERT_EQ(started, 0) << "node 3 did not come back";
  std::lock_guard lk(mu);
  std::cout << tokens.size() << " acquisitions, tokens " << tokens.front() << ".." << tokens.back() << ", losses";
  for (int l : losses) std::cout << ' ' << l;
  std::cout << (killed_a_holder ? " (node 3 was killed under a holder)" : " (node 3 held nothing when killed)")
            << '\n';
  EXPECT_EQ(overlaps, 0);
  EXPECT_TRUE(killed_a_holder) << "no contender on node 3 held the lock within 5 s: the kill tested no live lease";
  if (killed_a_holder) {
    EXPECT_GT(losses[2] + losses[5], 0) << "the holder on the killed node was never told of its loss";
  }
  // Every node serves acquisitions again once node 3 is back: a contender on each node holds at
  // least once. Not every contender: the lock is unfair (lease_options::fair is the fair one), and
  // the two contenders on the rejoined node get a few holds out of ~230 in 15 s, first 2-4 s after
  // it is back (its applier lags behind the others), so one of them can go without (seen in CI).
  for (int node = 1; node <= 3; ++node) {
    EXPECT_GT(after_restart[node - 1] + after_restart[node + 2], 0)
        << "no contender on node " << node << " held the lock after node 3 was back";
  }
  for (int i = 0; i < 6; ++i) {
    std::cout << "contender " << i << " (node " << i % 3 + 1 << "): first hold " << first_hold_ms[i]
              << " ms after node 3 was back, " << after_restart[i] << " holds, " << misses_after[i]
              << " waits not acquired, " << errors_after[i] << " errors" << (last_error[i].empty() ? "" : " (last: ")
              << last_error[i] << (last_error[i].empty() ? "" : ")") << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (node_url(1).empty()) {
    std::cerr << "galera_tests: SQLLOCK_TEST_GALERA_URL1..3 are not set; start the cluster with "
                 "scripts/galera-cluster.sh start DIR and source DIR/env.sh. This is a failure, not a skip.\n";
    return 2;
  }
  if (int rc = sqllock_testing::prepare_database(node_url(1), "galera_tests")) return rc;
  return RUN_ALL_TESTS();
}

namespace {

// Row locks (lock_rows, SELECT ... FOR UPDATE) are node-local on Galera: a transaction on another
// node locks the same row at once. What stays across nodes is certification: of two transactions
// that both wrote the row, the one certified second fails at its write or its commit with
// deadlock_detected (1213, retryable), and its write is not applied. Two that only lock the row and
// write other rows both commit: a locked row is no mutex across nodes (docs/mysql.md).
TEST_F(galera, RowLocksAreNodeLocalAndTheLaterWriterOfTheRowIsRolledBack) {
  const std::string table = sqllock_testing::unique_name("grow");
  auto a = admin(1);
  {
    auto tx = a.begin();
    tx.execute("CREATE TABLE " + table + " (id BIGINT PRIMARY KEY, qty BIGINT NOT NULL) ENGINE=InnoDB");
    tx.commit();
  }
  {
    auto tx = a.begin();
    tx.execute("INSERT INTO " + table + " VALUES (1, 10), (2, 0), (3, 0)");
    tx.commit();
  }
  auto c1 = sqllock::connect(node_url(1));
  auto c2 = sqllock::connect(node_url(2));
  sqllock::row_lock_request req{.table = table, .key_column = "id", .keys = {std::int64_t{1}}};
  req.mode = sqllock::lock_wait::nowait;
  auto tx1 = c1.begin();
  // wsrep_sync_wait: node 2 has applied the insert before its transaction reads.
  auto tx2 = c2.begin();
  tx2.execute("SET SESSION wsrep_sync_wait = 1");
  ASSERT_TRUE(tx1.lock_rows(req).acquired());
  EXPECT_TRUE(tx2.lock_rows(req).acquired()) << "a row lock excluded a transaction on another node";
  tx1.execute("UPDATE " + table + " SET qty = qty - 1 WHERE id = 1");
  tx1.commit();
  bool rolled_back = false;
  try {
    tx2.execute("UPDATE " + table + " SET qty = qty - 1 WHERE id = 1");
    tx2.commit();
  } catch (const sqllock::deadlock_detected&) {
    rolled_back = true;
  }
  EXPECT_TRUE(rolled_back) << "both writers of the row committed";
  // The row as a mutex for writes elsewhere: both lock it, each writes another row, both commit.
  auto tx3 = c1.begin();
  auto tx4 = c2.begin();
  tx4.execute("SET SESSION wsrep_sync_wait = 1");
  ASSERT_TRUE(tx3.lock_rows(req).acquired());
  EXPECT_TRUE(tx4.lock_rows(req).acquired());
  tx3.execute("UPDATE " + table + " SET qty = 1 WHERE id = 2");
  tx4.execute("UPDATE " + table + " SET qty = 1 WHERE id = 3");
  EXPECT_NO_THROW(tx3.commit());
  EXPECT_NO_THROW(tx4.commit());
  auto check = a.begin();
  check.execute("SET SESSION wsrep_sync_wait = 1");
  EXPECT_EQ(check.query("SELECT qty FROM " + table + " WHERE id = 1").at(0).as_int(0), 9);
  EXPECT_EQ(check.query("SELECT SUM(qty) FROM " + table + " WHERE id IN (2, 3)").at(0).as_int(0), 2);
  check.execute("DROP TABLE " + table);
  check.commit();
}

}  // namespace
