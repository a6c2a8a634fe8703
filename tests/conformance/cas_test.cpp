// Conformance: optimistic compare-and-swap on user tables and the retry helper.
#include <thread>

#include "conformance/fixture.hpp"

using namespace std::chrono_literals;
using namespace sqllock_test;

TEST(Cas, AppliedConflictAndMissingAreTypedResults) {
  auto c = make_client();
  user_table t(c, {{1, 10}});
  auto tx = c.begin();
  auto r = tx.cas({.table = t.name(), .key = {{"id", std::int64_t{1}}}, .expected_version = 1,
                   .set = {{"qty", std::int64_t{9}}}});
  EXPECT_EQ(r.outcome, sqllock::cas_result::status::applied);
  EXPECT_EQ(r.version, 2);
  auto stale = tx.cas({.table = t.name(), .key = {{"id", std::int64_t{1}}}, .expected_version = 1,
                       .set = {{"qty", std::int64_t{8}}}});
  EXPECT_EQ(stale.outcome, sqllock::cas_result::status::conflict);
  EXPECT_EQ(stale.version, 2);
  EXPECT_THROW(stale.value(), sqllock::version_conflict);
  auto missing = tx.cas({.table = t.name(), .key = {{"id", std::int64_t{99}}}, .expected_version = 1,
                         .set = {{"qty", std::int64_t{8}}}});
  EXPECT_EQ(missing.outcome, sqllock::cas_result::status::missing);
  tx.commit();
  EXPECT_EQ(t.qty(1), 9);
  EXPECT_EQ(t.version(1), 2);
}

TEST(Cas, UnchangedValuesStillCountAsApplied) {
  auto c = make_client();
  user_table t(c, {{1, 10}});
  auto tx = c.begin();
  auto r = tx.cas({.table = t.name(), .key = {{"id", std::int64_t{1}}}, .expected_version = 1,
                   .set = {{"qty", std::int64_t{10}}}});
  EXPECT_TRUE(r.applied());
  EXPECT_EQ(r.version, 2);
  tx.commit();
}

TEST(Cas, ConcurrentReadModifyWriteWithRetryLosesNoUpdate) {
  auto c = make_client();
  user_table t(c, {{1, 0}});
  constexpr int threads = 4, per_thread = 15;
  std::vector<std::thread> workers;
  std::atomic<int> attempts{0};
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&] {
      auto mine = make_client();
      for (int k = 0; k < per_thread; ++k) {
        sqllock::retry_stats stats;
        sqllock::with_retry(
            mine,
            [&](sqllock::transaction& tx) {
              auto row = tx.query("SELECT qty, version FROM " + t.name() + " WHERE id = ?", {std::int64_t{1}});
              auto qty = row.at(0).as_int(0);
              auto version = row.at(0).as_int(1);
              tx.cas({.table = t.name(), .key = {{"id", std::int64_t{1}}}, .expected_version = version,
                      .set = {{"qty", qty + 1}}})
                  .value();
            },
            {.max_attempts = 200}, &stats);
        attempts += stats.attempts;
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(t.qty(1), threads * per_thread);
  EXPECT_EQ(t.version(1), 1 + threads * per_thread);
  EXPECT_GE(attempts.load(), threads * per_thread);
}

TEST(Cas, RetryHelperGivesUpAfterItsBound) {
  auto c = make_client();
  user_table t(c, {{1, 0}});
  int runs = 0;
  EXPECT_THROW(sqllock::with_retry(
                   c,
                   [&](sqllock::transaction& tx) {
                     ++runs;
                     tx.cas({.table = t.name(), .key = {{"id", std::int64_t{1}}}, .expected_version = 42,
                             .set = {{"qty", std::int64_t{1}}}})
                         .value();
                   },
                   {.max_attempts = 3, .backoff_min = 1ms, .backoff_max = 2ms}),
               sqllock::retries_exhausted);
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(t.qty(1), 0);
}

TEST(Cas, InvalidIdentifiersAreRefusedAndChangeNothing) {
  auto c = make_client();
  user_table t(c, {{1, 5}});
  auto tx = c.begin();
  EXPECT_THROW(tx.cas({.table = t.name() + "; DROP TABLE x", .key = {{"id", std::int64_t{1}}}}),
               sqllock::invalid_argument);
  EXPECT_THROW(tx.cas({.table = t.name(), .key = {{"id = id OR 1", std::int64_t{1}}}}), sqllock::invalid_argument);
  EXPECT_THROW(tx.cas({.table = t.name(), .key = {{"id", std::int64_t{1}}}, .version_column = "version\"",
                       .expected_version = 1}),
               sqllock::invalid_argument);
  EXPECT_THROW(tx.cas({.table = t.name(), .key = {}, .expected_version = 1}), sqllock::invalid_argument);
  EXPECT_THROW(tx.cas({.table = t.name(), .key = {{"id", std::int64_t{1}}}, .expected_version = 1,
                       .set = {{"version", std::int64_t{7}}}}),
               sqllock::invalid_argument);
  tx.commit();
  EXPECT_EQ(t.qty(1), 5);
  EXPECT_EQ(t.version(1), 1);
}

// A key of the wrong type for the key column (text that is no number, or a number out of range,
// for a BIGINT column) never writes a row: MariaDB read 'two' as 0 and '1x' as 1, PostgreSQL raised
// 22P02/22003 inside the statement and left the whole transaction aborted. PostgreSQL refuses both
// and MariaDB text that is no number (invalid_argument naming the column) before any write; MariaDB
// compares a number out of range as the number it is, and SQLite, whose BIGINT column may hold such
// text (type affinity), compares the text as it is: no row has it. Either way the transaction and
// its earlier work go on.
TEST(Cas, KeysOfTheWrongTypeWriteNothingAndLeaveTheTransactionUsable) {
  auto c = make_client();
  user_table t(c, {{0, 10}, {1, 10}, {2, 10}});
  auto tx = c.begin();
  tx.execute("UPDATE " + t.name() + " SET qty = 11 WHERE id = ?", {std::int64_t{2}});
  for (const std::string key : {"two", "1x", "99999999999999999999"}) {
    for (const bool fenced : {false, true}) {
      const std::string what = std::string(fenced ? "fenced_update" : "cas") + " with key '" + key + "'";
      const bool refused_by_backend = c.dialect() == sqllock::dialect::postgresql ||
                                      (c.dialect() == sqllock::dialect::mysql && key != "99999999999999999999");
      try {
        const bool applied =
            fenced ? tx.fenced_update({.table = t.name(), .key = {{"id", key}}, .fence_column = "version",
                                       .token = 5, .set = {{"qty", std::int64_t{99}}}})
                         .applied()
                   : tx.cas({.table = t.name(), .key = {{"id", key}}, .expected_version = 1,
                             .set = {{"qty", std::int64_t{99}}}})
                         .applied();
        EXPECT_FALSE(applied) << what;
        EXPECT_FALSE(refused_by_backend) << what << " was not refused";
      } catch (const sqllock::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("column id"), std::string::npos) << e.what();
      } catch (const sqllock::error& e) {
        ADD_FAILURE() << what << ": not an invalid_argument: " << e.what();
      }
    }
  }
  // The transaction goes on, its earlier work with it.
  try {
    EXPECT_TRUE(tx.cas({.table = t.name(), .key = {{"id", std::int64_t{1}}}, .expected_version = 1,
                        .set = {{"qty", std::int64_t{12}}}})
                    .applied());
    EXPECT_TRUE(tx.fenced_update({.table = t.name(), .key = {{"id", std::int64_t{2}}}, .fence_column = "version",
                                  .token = 5, .set = {{"qty", std::int64_t{13}}}})
                    .applied());
    tx.commit();
  } catch (const sqllock::error& e) {
    ADD_FAILURE() << "the transaction did not go on: " << e.what();
  }
  EXPECT_EQ(t.qty(0), 10);
  EXPECT_EQ(t.version(0), 1);
  EXPECT_EQ(t.qty(1), 12);
  EXPECT_EQ(t.version(1), 2);
  EXPECT_EQ(t.qty(2), 13);
  EXPECT_EQ(t.version(2), 5);
}

TEST(Transaction, RollsBackWhenDestroyedUncommitted) {
  auto c = make_client();
  user_table t(c, {{1, 5}});
  {
    auto tx = c.begin();
    tx.execute("UPDATE " + t.name() + " SET qty = 0 WHERE id = ?", {std::int64_t{1}});
  }
  EXPECT_EQ(t.qty(1), 5);
  auto tx = c.begin();
  tx.execute("UPDATE " + t.name() + " SET qty = 1 WHERE id = ?", {std::int64_t{1}});
  tx.rollback();
  EXPECT_FALSE(tx.active());
  EXPECT_THROW(tx.commit(), sqllock::invalid_argument);
  EXPECT_EQ(t.qty(1), 5);
}

TEST(Transaction, AFailedStatementThatEndedTheTransactionLetsNothingAfterItCommit) {
  // A failed statement may end the whole transaction on the server: SQLite's INSERT OR ROLLBACK (a
  // table's ON CONFLICT ROLLBACK, RAISE(ROLLBACK) in a trigger, SQLITE_FULL ...) rolls it back and
  // leaves the connection in autocommit mode; PostgreSQL refuses every statement after an error;
  // MySQL undoes only the statement. Either way, what the caller sends after catching the error
  // belongs to the transaction: its rollback undoes it, and it never commits on its own (outside
  // the transaction's write lock or its lease guard).
  auto c = make_client();
  user_table t(c, {{1, 10}});
  auto tx = c.begin();
  tx.execute("UPDATE " + t.name() + " SET qty = 11 WHERE id = ?", {std::int64_t{1}});
  // SQLite: a duplicate key under OR ROLLBACK. Elsewhere a statement that fails without a
  // duplicate key (PostgreSQL's log is checked for none: PostgreSQL.ContentionAndConcurrentMigrate...).
  if (c.dialect() == sqllock::dialect::sqlite) {
    EXPECT_THROW(tx.execute("INSERT OR ROLLBACK INTO " + t.name() + " (id, qty, version) VALUES (?, 0, 1)",
                            {std::int64_t{1}}),
                 sqllock::error);
  } else {
    EXPECT_THROW(tx.execute("SELECT no_such_column FROM " + t.name()), sqllock::error);
  }
  try {
    tx.execute("UPDATE " + t.name() + " SET qty = 99 WHERE id = ?", {std::int64_t{1}});
  } catch (const sqllock::error&) {
    // refused: the transaction is over
  }
  tx.rollback();
  EXPECT_EQ(t.qty(1), 10) << "a write sent after the failed statement was committed on its own";
}

TEST(Transaction, BoundValuesAreNeverPastedIntoSql) {
  auto c = make_client();
  user_table t(c, {{1, 5}});
  auto tx = c.begin();
  auto rows = tx.query("SELECT ? FROM " + t.name() + " WHERE id = ?", {std::string("'); DROP TABLE x; --"),
                                                                     std::int64_t{1}});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].as_text(0), "'); DROP TABLE x; --");
  auto nulls = tx.query("SELECT COALESCE(?, 'was null') FROM " + t.name(), {std::monostate{}});
  EXPECT_EQ(nulls.at(0).as_text(0), "was null");
  tx.commit();
}
