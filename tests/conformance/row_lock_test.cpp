// Conformance: pessimistic row locks with NOWAIT, SKIP LOCKED and wait bounds, inside RAII transactions.
#include <thread>

#include "conformance/fixture.hpp"

using namespace std::chrono_literals;
using namespace sqllock_test;

namespace {
sqllock::row_lock_request lock_of(const user_table& t, std::vector<sqllock::value> keys,
                                  sqllock::lock_wait mode = sqllock::lock_wait::wait) {
  return {.table = t.name(), .key_column = "id", .keys = std::move(keys), .columns = {"id", "qty"}, .mode = mode};
}
}  // namespace

TEST(RowLock, LockedRowsComeBackInKeyOrder) {
  auto c = make_client();
  user_table t(c, {{1, 10}, {2, 20}, {3, 30}});
  auto tx = c.begin();
  auto r = tx.lock_rows(lock_of(t, {std::int64_t{3}, std::int64_t{1}, std::int64_t{99}}));
  ASSERT_TRUE(r.acquired());
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].as_int(0), 1);
  EXPECT_EQ(r.rows[0].as_int(1), 10);
  EXPECT_EQ(r.rows[1].as_int(0), 3);
  tx.commit();
}

TEST(RowLock, NowaitReportsNotAvailableAndTheTransactionStaysUsable) {
  auto c = make_client();
  user_table t(c, {{1, 10}, {2, 20}});
  auto holder = c.begin();
  ASSERT_TRUE(holder.lock_rows(lock_of(t, {std::int64_t{1}})).acquired());
  auto other = c.begin();
  auto start = clock::now();
  auto r = other.lock_rows(lock_of(t, {std::int64_t{1}}, sqllock::lock_wait::nowait));
  EXPECT_EQ(r.outcome, sqllock::row_lock_result::status::not_available);
  EXPECT_TRUE(r.rows.empty());
  EXPECT_LT(ms_since(start), 2000);
  if (!hooks().whole_database_row_locks) {
    // Another row is free, and the transaction survived the refusal.
    EXPECT_TRUE(other.lock_rows(lock_of(t, {std::int64_t{2}}, sqllock::lock_wait::nowait)).acquired());
  }
  holder.commit();
  other.rollback();
}

TEST(RowLock, AWaitBoundGivesNotAvailableAfterAboutThatLong) {
  auto c = make_client();
  user_table t(c, {{1, 10}});
  auto holder = c.begin();
  ASSERT_TRUE(holder.lock_rows(lock_of(t, {std::int64_t{1}})).acquired());
  auto other = c.begin();
  auto req = lock_of(t, {std::int64_t{1}});
  req.timeout = 1000ms;  // whole seconds on MariaDB (WAIT n)
  auto start = clock::now();
  auto r = other.lock_rows(req);
  auto took = ms_since(start);
  EXPECT_FALSE(r.acquired());
  EXPECT_GE(took, 900);
  EXPECT_LT(took, 5000);
  holder.rollback();
}

// A wait bound too large for the server's setting (PostgreSQL's lock_timeout and statement_timeout
// stop at 2^31-1 ms, about 24.8 days) means waiting without bound, never an error at once.
TEST(RowLock, AWaitBoundTooLargeForTheServerWaitsWithoutBound) {
  auto c = make_client();
  user_table t(c, {{1, 10}});
  auto holder = c.begin();
  ASSERT_TRUE(holder.lock_rows(lock_of(t, {std::int64_t{1}})).acquired());
  auto other = c.begin();
  std::thread ender([&] {
    std::this_thread::sleep_for(300ms);
    holder.rollback();
  });
  auto req = lock_of(t, {std::int64_t{1}});
  req.timeout = std::chrono::milliseconds::max();
  sqllock::row_lock_result r;
  EXPECT_NO_THROW(r = other.lock_rows(req));
  ender.join();
  EXPECT_TRUE(r.acquired());
  other.rollback();
  // The same for a transaction's lock_timeout.
  sqllock::transaction_options days;
  days.lock_timeout = std::chrono::hours(24 * 30);
  EXPECT_NO_THROW({
    auto tx = c.begin(days);
    EXPECT_TRUE(tx.lock_rows(lock_of(t, {std::int64_t{1}})).acquired());
  });
}

TEST(RowLock, AWaitBoundCoversTheWholeStatementNotEachRowInTurn) {
  // Three rows, each locked by another transaction that ends 0.7 s after the one before it: a
  // statement bounded to 1 s that waited up to its bound for each row in turn would come back after
  // about 2.1 s (PostgreSQL's lock_timeout and InnoDB's WAIT n bound each lock wait, not the
  // statement). The bound is the statement's.
  // SQLite has one database lock (BEGIN IMMEDIATE), which one transaction holds for the 2.1 s.
  const bool one_lock = hooks().whole_database_row_locks;
  auto c = make_client();
  user_table t(c, {{1, 10}, {2, 20}, {3, 30}});
  std::vector<sqllock::transaction> holders;
  for (std::int64_t k = 1; k <= (one_lock ? 1 : 3); ++k) {
    holders.push_back(c.begin());
    ASSERT_TRUE(holders.back().lock_rows(lock_of(t, {k})).acquired());
  }
  std::thread ender([&] {
    for (auto& h : holders) {
      std::this_thread::sleep_for(one_lock ? 2100ms : 700ms);
      h.rollback();
    }
  });
  auto other = c.begin();
  auto req = lock_of(t, {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}});
  req.timeout = 1000ms;  // whole seconds on MariaDB (WAIT n)
  const auto start = clock::now();
  const auto r = other.lock_rows(req);
  const auto took = ms_since(start);
  ender.join();
  EXPECT_LT(took, 1600) << "lock_rows bounded to 1 s came back after " << took << " ms (acquired: " << r.acquired()
                        << ")";
  if (!r.acquired()) {
    // The transaction survived the refusal: the rows are free now.
    EXPECT_TRUE(other.lock_rows(lock_of(t, {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}})).acquired());
  }
  other.rollback();
}

TEST(RowLock, SkipLockedReturnsOnlyTheFreeRows) {
  auto c = make_client();
  user_table t(c, {{1, 10}, {2, 20}, {3, 30}});
  auto holder = c.begin();
  ASSERT_TRUE(holder.lock_rows(lock_of(t, {std::int64_t{2}})).acquired());
  auto other = c.begin();
  auto r = other.lock_rows(lock_of(t, {std::int64_t{1}, std::int64_t{2}, std::int64_t{3}},
                                   sqllock::lock_wait::skip_locked));
  EXPECT_TRUE(r.acquired());
  if (hooks().whole_database_row_locks) {
    EXPECT_TRUE(r.rows.empty());  // SQLite: the whole database is write-locked by the holder
  } else {
    ASSERT_EQ(r.rows.size(), 2u);
    EXPECT_EQ(r.rows[0].as_int(0), 1);
    EXPECT_EQ(r.rows[1].as_int(0), 3);
  }
  holder.rollback();
  other.rollback();
}

TEST(RowLock, LockedReadModifyWriteLosesNoUpdate) {
  auto c = make_client();
  user_table t(c, {{1, 0}});
  constexpr int threads = 4, per_thread = 15;
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&] {
      auto mine = make_client();
      for (int k = 0; k < per_thread; ++k) {
        sqllock::with_retry(mine, [&](sqllock::transaction& tx) {
          auto r = tx.lock_rows(lock_of(t, {std::int64_t{1}}));
          if (!r.acquired()) throw sqllock::deadlock_detected("not available");
          auto qty = r.rows.at(0).as_int(1);
          std::this_thread::sleep_for(1ms);
          tx.execute("UPDATE " + t.name() + " SET qty = ? WHERE id = ?", {qty + 1, std::int64_t{1}});
        }, {.max_attempts = 50, .transaction = {.lock_timeout = 10s}});
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(t.qty(1), threads * per_thread);
}

TEST(RowLock, InvalidIdentifiersAreRefused) {
  auto c = make_client();
  user_table t(c, {{1, 0}});
  auto tx = c.begin();
  auto bad_table = lock_of(t, {std::int64_t{1}});
  bad_table.table = "x; DELETE FROM y";
  EXPECT_THROW(tx.lock_rows(bad_table), sqllock::invalid_argument);
  auto bad_col = lock_of(t, {std::int64_t{1}});
  bad_col.key_column = "id OR 1=1";
  EXPECT_THROW(tx.lock_rows(bad_col), sqllock::invalid_argument);
  auto no_keys = lock_of(t, {});
  EXPECT_THROW(tx.lock_rows(no_keys), sqllock::invalid_argument);
  tx.rollback();
}
