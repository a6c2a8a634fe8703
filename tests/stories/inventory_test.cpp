// The inventory helpers on this backend: hot-row decrements, multi-item orders, idempotency keys.
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "sqllock/inventory.hpp"
#include "story_fixture.hpp"

namespace stories {
namespace {

using sqllock::reserve_result;
using sqllock::stock_strategy;
using status = reserve_result::status;

// A stock table (sku BIGINT PRIMARY KEY, qty, version) with the given rows, dropped at scope end.
class stock {
 public:
  stock(sqllock::client& c, const std::vector<std::pair<std::int64_t, std::int64_t>>& rows)
      : c_(c), name_(unique_name("stock")) {
    auto tx = c_.begin();
    tx.execute("CREATE TABLE " + name_ + " (sku BIGINT PRIMARY KEY, qty BIGINT NOT NULL, version BIGINT NOT NULL)");
    for (auto [sku, qty] : rows) tx.execute("INSERT INTO " + name_ + " VALUES (?, ?, 1)", {sku, qty});
    tx.commit();
  }
  ~stock() {
    try {
      exec(c_, "DROP TABLE " + name_);
    } catch (...) {
    }
  }
  sqllock::stock_table table() const { return {.table = name_}; }
  const std::string& name() const { return name_; }
  std::int64_t version(std::int64_t sku) {
    return query(c_, "SELECT version FROM " + name_ + " WHERE sku = ?", {sku}).at(0).as_int(0);
  }
  std::int64_t qty(std::int64_t sku) {
    return query(c_, "SELECT qty FROM " + name_ + " WHERE sku = ?", {sku}).at(0).as_int(0);
  }

 private:
  sqllock::client& c_;
  std::string name_;
};

class Inventory : public ::testing::TestWithParam<stock_strategy> {
 protected:
  sqllock::reserve_options options() const {
    sqllock::reserve_options o;
    o.strategy = GetParam();
    o.max_attempts = 20;
    return o;
  }
};

std::string strategy_name(const ::testing::TestParamInfo<stock_strategy>& info) {
  switch (info.param) {
    case stock_strategy::atomic_update:
      return "atomic_update";
    case stock_strategy::optimistic_cas:
      return "optimistic_cas";
    case stock_strategy::for_update:
      return "for_update";
  }
  return "unknown";
}

TEST_P(Inventory, SixteenThreadsOnOneHotRowNeverOversell) {
  constexpr int initial = 96;
  auto admin = make_client();
  stock s(admin, {{1, initial}});
  std::vector<sqllock::client> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(make_client());
  std::mutex mu;
  std::multiset<std::int64_t> seen;  // every new quantity handed out
  std::atomic<int> applied{0}, exhausted{0}, errors{0};
  std::vector<std::thread> threads;
  const auto opts = options();
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      auto& c = clients[t % 4];
      for (;;) {
        try {
          auto r = sqllock::decrement(c, s.table(), std::int64_t{1}, 1, opts);
          if (r.outcome == status::insufficient) {
            EXPECT_EQ(r.available, 0);
            return;
          }
          if (r.outcome == status::retries_exhausted) {
            ++exhausted;
            continue;
          }
          ASSERT_EQ(r.outcome, status::applied);
          ++applied;
          std::lock_guard lk(mu);
          seen.insert(r.new_quantity());
        } catch (const std::exception& e) {
          ++errors;
          ADD_FAILURE() << e.what();
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(applied.load(), initial);
  EXPECT_EQ(s.qty(1), 0);
  std::multiset<std::int64_t> expected;
  for (int q = 0; q < initial; ++q) expected.insert(q);
  EXPECT_EQ(seen, expected) << "each unit was sold exactly once";
  RecordProperty("retries_exhausted", exhausted.load());
}

TEST_P(Inventory, OppositeOrderReservationsNeverDeadlock) {
  constexpr int per_thread = 25;
  auto admin = make_client();
  stock s(admin, {{1, 10000}, {2, 10000}, {3, 10000}});
  std::vector<sqllock::client> clients;
  for (int i = 0; i < 2; ++i) clients.push_back(make_client());
  std::atomic<int> applied{0}, retried{0}, errors{0};
  std::vector<std::thread> threads;
  const auto opts = options();
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      auto& c = clients[t % 2];
      // Half the threads take 1,2,3; the other half 3,2,1.
      std::vector<sqllock::stock_item> items =
          t % 2 ? std::vector<sqllock::stock_item>{{std::int64_t{1}, 1}, {std::int64_t{2}, 1}, {std::int64_t{3}, 1}}
                : std::vector<sqllock::stock_item>{{std::int64_t{3}, 1}, {std::int64_t{2}, 1}, {std::int64_t{1}, 1}};
      for (int i = 0; i < per_thread; ++i) {
        try {
          auto r = sqllock::reserve(c, s.table(), items, opts);
          if (r.attempts > 1) ++retried;
          if (r.applied()) {
            ++applied;
            EXPECT_EQ(r.new_quantities.size(), 3u);
          } else {
            EXPECT_EQ(r.outcome, status::retries_exhausted);
          }
        } catch (const std::exception& e) {
          ++errors;
          ADD_FAILURE() << e.what();
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  for (std::int64_t sku : {1, 2, 3}) EXPECT_EQ(s.qty(sku), 10000 - applied.load());
  if (GetParam() != stock_strategy::optimistic_cas) {
    // A deadlock (or any other retryable failure) would have shown up as a second attempt.
    EXPECT_EQ(retried.load(), 0);
    EXPECT_EQ(applied.load(), 6 * per_thread);
  }
}

TEST_P(Inventory, MultiItemIsAllOrNothing) {
  auto c = make_client();
  stock s(c, {{1, 5}, {2, 5}});
  auto r = sqllock::reserve(c, s.table(), {{std::int64_t{1}, 2}, {std::int64_t{2}, 6}}, options());
  EXPECT_EQ(r.outcome, status::insufficient);
  EXPECT_EQ(r.failed_item, 1u);
  EXPECT_EQ(r.available, 5);
  EXPECT_EQ(s.qty(1), 5);
  r = sqllock::reserve(c, s.table(), {{std::int64_t{2}, 1}, {std::int64_t{9}, 1}}, options());
  EXPECT_EQ(r.outcome, status::not_found);
  EXPECT_EQ(r.failed_item, 1u);
  EXPECT_EQ(s.qty(2), 5);
  // The same key twice is merged: 2 + 3 = 5 of sku 1.
  r = sqllock::reserve(c, s.table(), {{std::int64_t{1}, 2}, {std::int64_t{2}, 1}, {std::int64_t{1}, 3}}, options());
  ASSERT_TRUE(r.applied());
  EXPECT_EQ(r.new_quantities, (std::vector<std::int64_t>{0, 4, 0}));
  EXPECT_EQ(s.qty(1), 0);
  EXPECT_THROW(r.new_quantity() == 0 ? throw sqllock::invalid_argument("ok") : void(), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::decrement(c, s.table(), std::int64_t{1}, 0, options()), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::decrement(c, {.table = "bad;name"}, std::int64_t{1}, 1, options()), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::decrement(c, s.table(), sqllock::value{}, 1, options()), sqllock::invalid_argument);
}

TEST_P(Inventory, IdempotencyKeyAppliesOnceAfterALostAnswer) {
  auto c = make_client();
  sqllock::create_idempotency_table(c);
  sqllock::create_idempotency_table(c);  // idempotent
  stock s(c, {{1, 100}, {2, 1}});
  auto o = options();
  o.idempotency_key = unique_name("order");
  // The first attempt commits, but its answer is "lost" (the caller never sees it) ...
  (void)sqllock::decrement(c, s.table(), std::int64_t{1}, 3, o);
  // ... so the caller retries with the same key: the stored outcome comes back, nothing changes.
  auto again = sqllock::decrement(c, s.table(), std::int64_t{1}, 3, o);
  EXPECT_TRUE(again.applied());
  EXPECT_TRUE(again.replayed);
  EXPECT_EQ(again.new_quantity(), 97);
  EXPECT_EQ(s.qty(1), 97);
  // A different request under the same key is a caller bug.
  EXPECT_THROW(sqllock::decrement(c, s.table(), std::int64_t{1}, 4, o), sqllock::invalid_argument);

  // Concurrent duplicates (a client retrying while the first attempt is still in flight).
  o.idempotency_key = unique_name("order");
  std::vector<sqllock::client> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(make_client());
  std::atomic<int> fresh{0}, replayed{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto r = sqllock::decrement(clients[t % 4], s.table(), std::int64_t{1}, 5, o);
        EXPECT_TRUE(r.applied());
        EXPECT_EQ(r.new_quantity(), 92);
        (r.replayed ? replayed : fresh)++;
      } catch (const std::exception& e) {
        ++errors;
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(fresh.load(), 1);
  EXPECT_EQ(replayed.load(), 7);
  EXPECT_EQ(s.qty(1), 92);

  // A refusal is an outcome too: stored and replayed, even if stock arrives in between.
  o.idempotency_key = unique_name("order");
  auto no = sqllock::decrement(c, s.table(), std::int64_t{2}, 2, o);
  EXPECT_EQ(no.outcome, status::insufficient);
  exec(c, "UPDATE " + s.table().table + " SET qty = 10 WHERE sku = 2");
  auto no_again = sqllock::decrement(c, s.table(), std::int64_t{2}, 2, o);
  EXPECT_EQ(no_again.outcome, status::insufficient);
  EXPECT_TRUE(no_again.replayed);
  EXPECT_EQ(s.qty(2), 10);
}

TEST_P(Inventory, RowHeldElsewhereEndsInRetriesExhausted) {
  auto c = make_client();
  stock s(c, {{1, 10}});
  auto blocker_client = make_client();
  auto blocker = blocker_client.begin();
  auto held = blocker.lock_rows({.table = s.table().table, .key_column = "sku", .keys = {std::int64_t{1}}});
  ASSERT_TRUE(held.acquired());
  auto o = options();
  o.max_attempts = 2;
  o.transaction.lock_timeout = std::chrono::milliseconds(200);  // MySQL: rounded up to 1 s
  auto r = sqllock::decrement(c, s.table(), std::int64_t{1}, 1, o);
  EXPECT_EQ(r.outcome, status::retries_exhausted);
  EXPECT_EQ(r.attempts, 2);
  blocker.rollback();
  EXPECT_EQ(s.qty(1), 10);
  EXPECT_TRUE(sqllock::decrement(c, s.table(), std::int64_t{1}, 1, o).applied());
}

// Waits until another session's statement on `table` waits for a lock (PostgreSQL, MySQL), so a
// test can release the lock at a known point of that statement. SQLite: a short sleep (the
// waiter sits in BEGIN IMMEDIATE's busy loop, which no view shows).
void wait_until_blocked_on(const std::string& table) {
  auto probe = make_client();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string sql;
  switch (current_dialect()) {
    case sqllock::dialect::postgresql:
      sql =
          "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
          " AND query LIKE ?";
      break;
    case sqllock::dialect::mysql:
      // A statement on the table still running (it only stays visible while it waits).
      sql =
          "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()"
          " AND COMMAND <> 'Sleep' AND INFO LIKE ?";
      break;
    case sqllock::dialect::sqlite:
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      return;
  }
  int seen = 0;  // two sightings 50 ms apart: waiting, not merely running
  while (std::chrono::steady_clock::now() < deadline) {
    seen = query(probe, sql, {"%" + table + "%"}).at(0).as_int(0) > 0 ? seen + 1 : 0;
    if (seen >= 2) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "no statement on " << table << " ever waited for a lock";
}

TEST_P(Inventory, EveryStrategyBumpsTheVersion) {
  // Issue 10 item 9: a writer that changes the quantity without bumping the version lets another
  // writer's version-checked CAS overwrite its change.
  auto c = make_client();
  stock s(c, {{1, 10}, {2, 10}});
  ASSERT_TRUE(sqllock::decrement(c, s.table(), std::int64_t{1}, 1, options()).applied());
  EXPECT_EQ(s.version(1), 2);
  ASSERT_TRUE(sqllock::reserve(c, s.table(), {{std::int64_t{1}, 2}, {std::int64_t{2}, 3}}, options()).applied());
  EXPECT_EQ(s.version(1), 3);
  EXPECT_EQ(s.version(2), 2);
  // A refusal changes nothing, the version included.
  EXPECT_EQ(sqllock::decrement(c, s.table(), std::int64_t{2}, 99, options()).outcome, status::insufficient);
  EXPECT_EQ(s.version(2), 2);
}

TEST_P(Inventory, InsufficientReportsTheQuantityCommittedMeanwhile) {
  // Issue 10 "suspected": on MySQL (REPEATABLE READ) the `available` of an insufficient answer was
  // read from the transaction's snapshot, taken before another order committed.
  auto c = make_client();
  stock s(c, {{1, 5}, {2, 5}});
  auto other = make_client();
  auto blocker = other.begin();
  // Another order holds sku 2 (5 -> 1) until we let it commit.
  ASSERT_EQ(blocker.execute("UPDATE " + s.name() + " SET qty = 1, version = version + 1 WHERE sku = 2"), 1);
  reserve_result r;
  std::string thrown;
  std::thread order([&] {
    try {
      r = sqllock::reserve(c, s.table(), {{std::int64_t{1}, 1}, {std::int64_t{2}, 3}}, options());
    } catch (const std::exception& e) {
      thrown = e.what();
    }
  });
  wait_until_blocked_on(s.name());
  blocker.commit();
  order.join();
  ASSERT_EQ(thrown, "");
  EXPECT_EQ(r.outcome, status::insufficient);
  EXPECT_EQ(r.failed_item, 1u);
  EXPECT_EQ(r.available, 1) << "available must be the quantity the refusal was decided on";
  EXPECT_EQ(s.qty(1), 5);
  EXPECT_EQ(s.qty(2), 1);
}

// Keys the database calls equal name one row, whatever their bytes: MariaDB's usual collations
// (utf8mb4_general_ci here, declared on the column since the test database defaults to _bin) ignore
// case and trailing spaces (PAD SPACE), so "Sku-1", "sku-1" and "Sku-1 " are one item there, merged
// like repeated keys; PostgreSQL and SQLite compare bytes by default, so there they are three keys.
class text_stock {
 public:
  explicit text_stock(sqllock::client& c) : c_(c), name_(unique_name("tstock")) {
    const std::string collate = current_dialect() == sqllock::dialect::mysql ? " COLLATE utf8mb4_general_ci" : "";
    exec(c_, "CREATE TABLE " + name_ + " (sku VARCHAR(32)" + collate +
                 " PRIMARY KEY, qty BIGINT NOT NULL, version BIGINT NOT NULL)");
    exec(c_, "INSERT INTO " + name_ + " VALUES ('Sku-1', 10, 1)");
  }
  ~text_stock() {
    try {
      exec(c_, "DROP TABLE " + name_);
    } catch (...) {
    }
  }
  sqllock::stock_table table() const { return {.table = name_}; }
  std::int64_t qty() { return query(c_, "SELECT qty FROM " + name_).at(0).as_int(0); }

 private:
  sqllock::client& c_;
  std::string name_;
};

TEST_P(Inventory, KeysTheDatabaseCallsEqualAreOneItem) {
  auto c = make_client();
  text_stock s(c);
  const std::vector<sqllock::stock_item> items = {
      {std::string("Sku-1"), 2}, {std::string("sku-1"), 3}, {std::string("Sku-1 "), 1}};
  auto r = sqllock::reserve(c, s.table(), items, options());
  if (current_dialect() != sqllock::dialect::mysql) {
    EXPECT_EQ(r.outcome, status::not_found);
    EXPECT_EQ(r.failed_item, 2u) << "\"Sku-1 \" sorts before \"sku-1\" bytewise and has no row";
    EXPECT_EQ(s.qty(), 10);
    return;
  }
  ASSERT_EQ(r.outcome, status::applied) << "attempts " << r.attempts;
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(r.new_quantities, (std::vector<std::int64_t>{4, 4, 4})) << "one row: one quantity left";
  EXPECT_EQ(s.qty(), 4);
  // Too much in total, though each spelling alone would fit: refused on the row's committed
  // quantity, for the request's first item of the row, and nothing changes.
  auto refused = sqllock::reserve(c, s.table(), {{std::string("sku-1"), 3}, {std::string("SKU-1"), 2}}, options());
  EXPECT_EQ(refused.outcome, status::insufficient);
  EXPECT_EQ(refused.failed_item, 0u);
  EXPECT_EQ(refused.available, 4);
  EXPECT_EQ(s.qty(), 4);
}

INSTANTIATE_TEST_SUITE_P(Strategies, Inventory,
                         ::testing::Values(stock_strategy::atomic_update, stock_strategy::optimistic_cas,
                                           stock_strategy::for_update),
                         strategy_name);

// Issue 10 item 9: every strategy at once on one row (each thread its own client), each taking 1
// until the stock is gone. Every acknowledged decrement must be in the table: successes == initial
// - final, never below 0, and each remaining quantity handed out exactly once.
TEST(InventoryMix, AllStrategiesAtOnceOnOneRowNeverLoseADecrement) {
  constexpr int initial = 300;
  constexpr int per_strategy = 4;
  const stock_strategy strategies[] = {stock_strategy::atomic_update, stock_strategy::optimistic_cas,
                                       stock_strategy::for_update};
  auto admin = make_client();
  stock s(admin, {{1, initial}});
  std::vector<sqllock::client> clients;
  for (int i = 0; i < 3 * per_strategy; ++i) clients.push_back(make_client());
  std::mutex mu;
  std::multiset<std::int64_t> seen;
  std::atomic<int> applied_by[3] = {0, 0, 0};
  std::atomic<int> exhausted{0}, errors{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3 * per_strategy; ++t) {
    threads.emplace_back([&, t] {
      sqllock::reserve_options o;
      o.strategy = strategies[t % 3];
      o.max_attempts = 20;
      while (std::chrono::steady_clock::now() < deadline) {
        try {
          auto r = sqllock::decrement(clients[t], s.table(), std::int64_t{1}, 1, o);
          if (r.outcome == status::insufficient) return;
          if (r.outcome == status::retries_exhausted) {
            ++exhausted;
            continue;
          }
          ASSERT_EQ(r.outcome, status::applied);
          ++applied_by[t % 3];
          std::lock_guard lk(mu);
          seen.insert(r.new_quantity());
        } catch (const std::exception& e) {
          ++errors;
          ADD_FAILURE() << e.what();
          return;
        }
      }
      ADD_FAILURE() << "a worker was still running after 120 s";
    });
  }
  for (auto& th : threads) th.join();
  const int applied = applied_by[0] + applied_by[1] + applied_by[2];
  const auto final_qty = s.qty(1);
  std::cout << "[ mix      ] applied " << applied << " (atomic_update " << applied_by[0] << ", optimistic_cas "
            << applied_by[1] << ", for_update " << applied_by[2] << "), final stock " << final_qty
            << ", lost decrements " << applied - (initial - final_qty) << ", retries_exhausted " << exhausted.load()
            << "\n";
  EXPECT_EQ(errors.load(), 0);
  EXPECT_GE(final_qty, 0);
  EXPECT_EQ(applied, initial - final_qty) << "acknowledged decrements missing from the table";
  EXPECT_EQ(final_qty, 0);
  std::multiset<std::int64_t> expected;
  for (int q = 0; q < initial; ++q) expected.insert(q);
  EXPECT_EQ(seen, expected) << "each unit was sold exactly once";
}

// optimistic_cas writes relative to the row (qty = qty - n AND qty >= n), so even a writer outside
// sqllock that forgets the version (a plain `SET qty = qty - 1`) loses nothing and cannot make it
// oversell.
TEST(InventoryMix, CasKeepsADecrementThatLeftTheVersionAlone) {
  constexpr int initial = 200;
  auto admin = make_client();
  stock s(admin, {{1, initial}});
  std::vector<sqllock::client> clients;
  for (int i = 0; i < 6; ++i) clients.push_back(make_client());
  std::atomic<int> cas_applied{0}, plain_applied{0}, errors{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      sqllock::reserve_options o;
      o.strategy = stock_strategy::optimistic_cas;
      o.max_attempts = 20;
      while (std::chrono::steady_clock::now() < deadline) {
        try {
          if (t % 2) {
            auto tx = clients[t].begin();
            const auto n = tx.execute("UPDATE " + s.name() + " SET qty = qty - 1 WHERE sku = 1 AND qty >= 1");
            tx.commit();
            if (n == 0) return;
            ++plain_applied;
          } else {
            auto r = sqllock::decrement(clients[t], s.table(), std::int64_t{1}, 1, o);
            if (r.outcome == status::insufficient) return;
            if (r.applied()) ++cas_applied;
          }
        } catch (const sqllock::retryable_error&) {
          // A deadlock or serialization failure of the plain writer: try again.
        } catch (const std::exception& e) {
          ++errors;
          ADD_FAILURE() << e.what();
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto final_qty = s.qty(1);
  std::cout << "[ plain    ] cas " << cas_applied.load() << ", plain " << plain_applied.load() << ", final stock "
            << final_qty << "\n";
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(final_qty, 0);
  EXPECT_EQ(cas_applied + plain_applied, initial - final_qty);
}

// A table without a version column: an empty version_column says so; the strategies that do not
// need one still work, optimistic_cas is refused.
TEST(InventoryNoVersion, EmptyVersionColumnMeansNone) {
  auto c = make_client();
  const auto name = unique_name("stock_nv");
  exec(c, "CREATE TABLE " + name + " (sku BIGINT PRIMARY KEY, qty BIGINT NOT NULL)");
  exec(c, "INSERT INTO " + name + " VALUES (1, 10)");
  const sqllock::stock_table t{.table = name, .version_column = ""};
  for (auto strategy : {stock_strategy::atomic_update, stock_strategy::for_update}) {
    auto r = sqllock::decrement(c, t, std::int64_t{1}, 2, {.strategy = strategy});
    ASSERT_TRUE(r.applied());
  }
  EXPECT_EQ(query(c, "SELECT qty FROM " + name).at(0).as_int(0), 6);
  EXPECT_THROW(sqllock::decrement(c, t, std::int64_t{1}, 1, {.strategy = stock_strategy::optimistic_cas}),
               sqllock::invalid_argument);
  // The default names a version column; a table without it is an error, never a silent skip.
  EXPECT_THROW(sqllock::decrement(c, {.table = name}, std::int64_t{1}, 1), sqllock::error);
  EXPECT_EQ(query(c, "SELECT qty FROM " + name).at(0).as_int(0), 6);
  exec(c, "DROP TABLE " + name);
}

}  // namespace
}  // namespace stories
