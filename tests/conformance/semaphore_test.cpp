// Conformance: counting semaphores (issue 16): N permits per name, each a lease with its own expiry,
// watchdog, loss reporting and fencing token; the permit count stored with the name; schema 3.
#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "conformance/fixture.hpp"
#include "core/backend.hpp"
#include "sqllock/migrations.hpp"

using namespace std::chrono_literals;
using namespace sqllock_test;

// Curator's and Redisson's check, ported: 10 workers x 25 acquisitions of a 3-permit semaphore
// never see more than 3 inside.
TEST(Semaphore, TenWorkersNeverSeeMoreThanThreePermitsInside) {
  const auto name = unique_name("sem_ten");
  constexpr int workers = 10, rounds = 25, permits = 3;
  std::atomic<int> inside{0}, max_inside{0}, done{0}, errors{0};
  std::vector<std::jthread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      try {
        auto c = make_client();
        for (int i = 0; i < rounds; ++i) {
          auto g = c.acquire_permit_for(name, permits, 120s, {.ttl = 10s});
          const int now = ++inside;
          int seen = max_inside.load();
          while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
          }
          std::this_thread::sleep_for(15ms);  // long enough that the permits are all taken most of the time
          --inside;
          g.release();
          ++done;
        }
      } catch (const std::exception& e) {
        ++errors;
        ADD_FAILURE() << e.what();
      }
    });
  }
  threads.clear();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(done.load(), workers * rounds);
  EXPECT_LE(max_inside.load(), permits) << "more holders inside than permits";
  EXPECT_GE(max_inside.load(), 2) << "the permits were never held side by side";
}

// A client takes as many permits as there are, each a different slot; it never re-enters its own.
TEST(Semaphore, EachAcquireTakesAnotherPermitUpToTheCount) {
  auto a = make_client();
  auto b = make_client();
  const auto name = unique_name("sem_count");
  std::vector<sqllock::lease_guard> held;
  std::set<int> slots;
  for (int i = 0; i < 3; ++i) {
    auto g = a.try_acquire_permit(name, 3);
    ASSERT_TRUE(g) << "permit " << i << " of 3 was refused";
    EXPECT_EQ(g->name(), name);
    EXPECT_EQ(g->hold_count(), 1);
    EXPECT_GE(g->permit(), 0);
    EXPECT_LT(g->permit(), 3);
    slots.insert(g->permit());
    held.push_back(std::move(*g));
  }
  EXPECT_EQ(slots.size(), 3u) << "two acquisitions shared one permit";
  EXPECT_FALSE(a.try_acquire_permit(name, 3)) << "a fourth permit of three";
  EXPECT_FALSE(b.try_acquire_permit(name, 3)) << "a fourth permit of three (another client)";
  EXPECT_FALSE(b.try_acquire_permit_for(name, 3, 300ms));
  EXPECT_THROW(b.acquire_permit_for(name, 3, 200ms), sqllock::acquire_timeout);
  // A plain lock of the same name is another thing altogether.
  EXPECT_TRUE(b.try_acquire(name));
  const int freed = held[1].permit();
  held[1].release();
  auto again = b.try_acquire_permit(name, 3);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->permit(), freed);
}

// inspect_semaphore() reports a live permit holder under the semaphore's name (the lease that ends
// last), and nothing for a plain lock or a reader-writer lease of the same name.
TEST(Semaphore, InspectSemaphoreReportsAPermitHolderUnderTheSemaphoresName) {
  auto a = make_client();
  auto b = make_client();
  const auto name = unique_name("sem_inspect");
  EXPECT_FALSE(b.inspect_semaphore(name));
  auto plain = a.try_acquire(name, {.ttl = 60s});
  ASSERT_TRUE(plain);
  auto write = a.try_acquire_write(name, {.ttl = 60s});
  ASSERT_TRUE(write);
  EXPECT_FALSE(b.inspect_semaphore(name)) << "a plain lock or a reader-writer lease counted as a permit";
  auto first = a.try_acquire_permit(name, 2, {.ttl = 10s});
  ASSERT_TRUE(first);
  auto last = a.try_acquire_permit(name, 2, {.ttl = 30s});
  ASSERT_TRUE(last);
  auto info = b.inspect_semaphore(name);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->name, name);
  EXPECT_EQ(info->fencing_token, last->fencing_token());
  EXPECT_GT(info->time_left, 20s) << "not the permit whose lease ends last";
  last->release();
  first->release();
  EXPECT_FALSE(b.inspect_semaphore(name));
  EXPECT_THROW((void)b.inspect_semaphore(""), sqllock::invalid_argument);
}

// A waiting acquire gets a permit as soon as a holder of the same client releases one.
TEST(Semaphore, AWaiterGetsTheReleasedPermit) {
  auto a = make_client();
  auto b = make_client();
  const auto name = unique_name("sem_wait");
  auto g1 = a.try_acquire_permit(name, 2);
  auto g2 = a.try_acquire_permit(name, 2);
  ASSERT_TRUE(g1 && g2);
  std::jthread releaser([&] {
    std::this_thread::sleep_for(300ms);
    g2->release();
  });
  const auto t0 = clock::now();
  auto g = b.acquire_permit_for(name, 2, 10s);
  EXPECT_GE(ms_since(t0), 250);
  EXPECT_LT(ms_since(t0), 3000);
  EXPECT_EQ(g.permit(), g2->permit());
}

// A held permit guards a transaction (transaction::require_lease) like a lock's lease: the check reads
// the permit's own row, not a row named after the semaphore (found by the fault harness with
// --permits: every guarded write of a permit was refused with lease_lost).
TEST(Semaphore, AHeldPermitGuardsATransaction) {
  auto a = make_client();
  auto b = make_client();
  const auto name = unique_name("sem_guard");
  auto g0 = b.try_acquire_permit(name, 2);  // another holder on the other slot
  auto g = a.try_acquire_permit(name, 2);
  ASSERT_TRUE(g0 && g);
  {
    auto tx = a.begin();
    EXPECT_NO_THROW(tx.require_lease(*g));
    tx.commit();
  }
  g->release();
  g0->release();
}

// A single try (no wait) of a permit answers at once, also while another client's transaction
// holds the database's write lock (SQLite: any write transaction) or the semaphore's rows: a
// refusal is a result. On SQLite the try stored the permit count with a write on every call (the
// count is fixed at first use), under the default 5 s busy timeout, so it waited those 5 s.
TEST(Semaphore, ATryBesideAnotherClientsWriteTransactionAnswersAtOnce) {
  auto a = make_client();
  auto b = make_client();
  user_table t(a, {{1, 10}});
  const auto name = unique_name("sem_try_tx");
  auto g = a.try_acquire_permit(name, 1);
  ASSERT_TRUE(g);
  auto tx = a.begin();
  tx.require_lease(*g);
  tx.execute("UPDATE " + t.name() + " SET qty = qty + 1 WHERE id = ?", {std::int64_t{1}});
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(b.try_acquire_permit_for(name, 1, 0ms));
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  EXPECT_LT(took, 2000ms) << "a permit try beside a write transaction came back after " << took.count() << " ms";
  tx.commit();
  g->release();
}

// The first use of a semaphore name stores its permit count: a write, which on SQLite waits for any
// other write transaction. Beside one, a try still answers at once and a bounded wait ends at its
// bound, neither with an error; the name works once the transaction has ended. Before, the first
// use waited the 5 s busy timeout and threw "database is locked".
TEST(Semaphore, TheFirstUseBesideAnotherClientsWriteTransactionAnswersWithinItsBound) {
  using std::chrono::steady_clock;
  auto a = make_client();
  auto b = make_client();
  user_table t(a, {{1, 10}});
  const auto name = unique_name("sem_first_tx");
  auto tx = a.begin();
  tx.execute("UPDATE " + t.name() + " SET qty = qty + 1 WHERE id = ?", {std::int64_t{1}});
  auto took_since = [](steady_clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now() - t0);
  };
  std::optional<sqllock::lease_guard> g;
  auto started = steady_clock::now();
  EXPECT_NO_THROW(g = b.try_acquire_permit_for(name, 2, 0ms));
  EXPECT_LT(took_since(started), 2000ms) << "a first-use try beside a write transaction came back late";
  if (g) g->release();
  g.reset();
  started = steady_clock::now();
  EXPECT_NO_THROW(g = b.try_acquire_permit_for(name, 2, 700ms));
  EXPECT_LT(took_since(started), 3000ms) << "a first-use wait of 700 ms beside a write transaction came back late";
  if (g) g->release();
  g.reset();
  tx.commit();
  auto h = b.try_acquire_permit(name, 2);
  EXPECT_TRUE(h) << "no permit once the transaction had ended";
}

// The permit of a holder that stops renewing (it died) expires on the database clock and is free
// again; its guard reports the loss.
TEST(Semaphore, APermitOfADeadHolderExpiresAndBecomesAvailable) {
  auto b = make_client();
  const auto name = unique_name("sem_dead");
  std::atomic<int> lost_calls{0};
  std::optional<sqllock::lease_guard> g1, g2;
  {
    auto a = make_client();
    g1 = a.try_acquire_permit(name, 2, {.ttl = 1000ms, .auto_renew = false, .on_lost = [&](auto&, auto) { ++lost_calls; }});
    g2 = a.try_acquire_permit(name, 2, {.ttl = 30s});
    ASSERT_TRUE(g1 && g2);
  }
  EXPECT_FALSE(b.try_acquire_permit(name, 2)) << "a third permit of two while both are live";
  const auto t0 = clock::now();
  auto g = b.acquire_permit_for(name, 2, 10s, {.ttl = 5s});
  EXPECT_GE(ms_since(t0), 500) << "the expired permit was free too early";
  EXPECT_EQ(g.permit(), g1->permit());
  EXPECT_GT(g.fencing_token(), g1->fencing_token());
  // By this process's clock the dead holder's permit is past its loss point before the database
  // frees it: not usable() now. lost() and on_lost wait for its client's deadline thread, which
  // may run late (a loaded machine): wait for them.
  EXPECT_FALSE(g1->usable()) << "the dead holder's permit is usable while another holds its slot";
  EXPECT_TRUE(eventually([&] { return g1->lost(); }, 2s)) << "the loss was never reported by lost()";
  EXPECT_TRUE(eventually([&] { return lost_calls.load() == 1; }, 2s)) << "on_lost trails lost() by a moment at most";
  EXPECT_EQ(lost_calls.load(), 1);
  EXPECT_FALSE(g2->lost());
}

// A permit's lease is renewed by the watchdog like a lock's.
TEST(Semaphore, TheWatchdogRenewsAPermit) {
  auto a = make_client();
  auto b = make_client();
  const auto name = unique_name("sem_renew");
  auto g = a.try_acquire_permit(name, 1, {.ttl = 600ms});
  ASSERT_TRUE(g);
  std::this_thread::sleep_for(1500ms);
  EXPECT_FALSE(g->lost());
  EXPECT_FALSE(b.try_acquire_permit(name, 1)) << "a renewed permit was taken over";
}

// The permit count is stored with the name; asking with another count is a typed error naming
// both numbers, and it changes nothing (from this client or a fresh one).
TEST(Semaphore, AMismatchedPermitCountIsATypedErrorThatChangesNothing) {
  auto a = make_client();
  auto b = make_client();
  const auto name = unique_name("sem_mismatch");
  auto g = a.try_acquire_permit(name, 2);
  ASSERT_TRUE(g);
  for (auto* c : {&a, &b}) {
    try {
      (void)c->try_acquire_permit(name, 3);
      ADD_FAILURE() << "a different permit count was accepted";
    } catch (const sqllock::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("has 2 permits"), std::string::npos) << what;
      EXPECT_NE(what.find("asked with 3"), std::string::npos) << what;
      EXPECT_NE(what.find(name), std::string::npos) << what;
    }
    EXPECT_THROW(c->acquire_permit_for(name, 1, 1s), sqllock::invalid_argument);
  }
  // Still two permits: one more, then none.
  auto g2 = b.try_acquire_permit(name, 2);
  EXPECT_TRUE(g2);
  EXPECT_FALSE(make_client().try_acquire_permit(name, 2));
}

TEST(Semaphore, BadArgumentsAreTypedErrors) {
  auto a = make_client();
  const auto name = unique_name("sem_bad");
  EXPECT_THROW(a.try_acquire_permit(name, 0), sqllock::invalid_argument);
  EXPECT_THROW(a.try_acquire_permit(name, -1), sqllock::invalid_argument);
  EXPECT_THROW(a.try_acquire_permit(name, 10001), sqllock::invalid_argument);
  EXPECT_THROW(a.try_acquire_permit("", 2), sqllock::invalid_argument);
  EXPECT_THROW(a.try_acquire_permit(std::string(256, 'x'), 2), sqllock::invalid_argument);
  EXPECT_THROW(a.try_acquire_permit(name, 2, {.ttl = 0ms}), sqllock::invalid_argument);
  EXPECT_THROW(a.try_acquire_permit_for(name, 2, -1ms), sqllock::invalid_argument);
  std::stop_source stopped;
  stopped.request_stop();
  EXPECT_THROW(a.acquire_permit(name, 2, {}, stopped.get_token()), sqllock::cancelled);
  // None of these stored a count: the first real use decides it.
  EXPECT_TRUE(a.try_acquire_permit(name, 5));
  // A 255-byte semaphore name works (its permit rows are longer than any lock name).
  EXPECT_TRUE(a.try_acquire_permit(unique_name("sem_long") + std::string(200, 'y'), 1));
}

// Cancelling a waiting acquire with its stop token.
TEST(Semaphore, AStopTokenCancelsAWaitingAcquire) {
  auto a = make_client();
  auto b = make_client();
  const auto name = unique_name("sem_stop");
  auto g = a.try_acquire_permit(name, 1);
  ASSERT_TRUE(g);
  std::stop_source stop;
  std::jthread stopper([&] {
    std::this_thread::sleep_for(300ms);
    stop.request_stop();
  });
  const auto t0 = clock::now();
  EXPECT_THROW(b.acquire_permit(name, 1, {}, stop.get_token()), sqllock::cancelled);
  EXPECT_LT(ms_since(t0), 3000);
}

// Fencing tokens grow strictly per permit slot: fresh, after release, after takeover of an expired
// permit.
TEST(Semaphore, TokensStrictlyIncreasePerSlot) {
  auto a = make_client();
  auto b = make_client();
  const auto name = unique_name("sem_tokens");
  std::map<int, std::int64_t> last;
  std::vector<sqllock::lease_guard> expired;  // never released: the next holder takes them over
  for (int i = 0; i < 12; ++i) {
    auto& c = i % 2 ? a : b;
    auto g = c.try_acquire_permit(name, 2, {.ttl = 300ms, .auto_renew = i % 3 != 0});
    ASSERT_TRUE(g);
    auto it = last.find(g->permit());
    if (it != last.end()) {
      EXPECT_GT(g->fencing_token(), it->second) << "slot " << g->permit() << " round " << i;
    }
    last[g->permit()] = g->fencing_token();
    if (i % 3 == 0) {
      std::this_thread::sleep_for(400ms);  // let it expire
      EXPECT_TRUE(g->lost());
      expired.push_back(std::move(*g));
    } else {
      g->release();
    }
  }
  EXPECT_EQ(last.size(), 2u);
}


// A database at schema version 2 (the previous release), with a lease held in it, is upgraded in
// place by migrate(): the lease, its owner and every token survive; semaphores then work.
TEST(Semaphore, MigrateUpgradesAVersionTwoDatabaseInPlace) {
  const auto table = unique_name("v2");
  auto c = make_client({.table = table, .require_schema = false});
  ASSERT_EQ(c.schema_version(), 0);
  {
    auto tx = c.begin();
    if (c.dialect() == sqllock::dialect::sqlite) {  // its migrate() creates the version table itself
      tx.execute(sqllock::detail::render_sql(sqllock::detail::embedded_sql(c.dialect(), "schema_table"), table,
                                             c.dialect()));
    }
    for (const auto& m : sqllock::detail::embedded_migrations(c.dialect())) {
      if (m.version > 2) break;
      for (const auto& stmt :
           sqllock::split_sql_statements(sqllock::detail::render_sql(m.text, table, c.dialect()), c.dialect())) {
        tx.execute(stmt);
      }
      tx.execute(record_version_sql(c.dialect(), table + "_schema", m.version));
    }
    tx.commit();
  }
  ASSERT_EQ(c.schema_version(), 2);
  EXPECT_THROW(sqllock::connect(hooks().url, {.table = table}), sqllock::schema_missing);
  const auto name = unique_name("held_across_upgrade");
  auto g = c.try_acquire(name, {.ttl = 30s});
  ASSERT_TRUE(g);
  auto other = c.try_acquire(unique_name("released_before_upgrade"));
  ASSERT_TRUE(other);
  const auto other_name = other->name();
  const auto other_token = other->fencing_token();
  other->release();

  EXPECT_EQ(c.migrate(), sqllock::client::required_schema_version());
  EXPECT_EQ(c.schema_version(), sqllock::client::required_schema_version());
  EXPECT_EQ(c.migrate(), sqllock::client::required_schema_version()) << "migrate is idempotent";

  auto d = make_client({.table = table});  // require_schema: version 3 is there now
  auto info = d.inspect(name);
  ASSERT_TRUE(info) << "the lease held across the upgrade is gone";
  EXPECT_EQ(info->owner, g->owner_id());
  EXPECT_EQ(info->fencing_token, g->fencing_token());
  EXPECT_FALSE(d.try_acquire(name));
  g->renew();
  g->release();
  auto again = d.try_acquire(other_name);
  ASSERT_TRUE(again);
  EXPECT_GT(again->fencing_token(), other_token) << "a token went back after the upgrade";
  auto p = d.try_acquire_permit(unique_name("sem_after_upgrade"), 2);
  ASSERT_TRUE(p);
  EXPECT_TRUE(d.try_acquire_permit(unique_name("sem_after_upgrade_long") + std::string(200, 'z'), 1));
  p->release();
  again->release();

  auto tx = c.begin();
  tx.execute("DROP TABLE " + table);
  tx.execute("DROP TABLE " + table + "_schema");
  tx.execute("DROP TABLE " + table + "_semaphores");
  tx.execute("DROP TABLE " + table + "_queue");
  tx.commit();
}
