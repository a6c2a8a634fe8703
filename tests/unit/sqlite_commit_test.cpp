// A SQLite COMMIT the database refuses: the session rolls back, hands its connection back (closed,
// since it is not known to be clean) and reports the refusal. The report was built from the
// connection after it was closed (sqlite3_errmsg on a freed handle): its text was SQLite's "bad
// parameter or other API misuse" instead of the reason, read from freed memory.
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "sqllock/sqllock.hpp"

using namespace std::chrono_literals;

TEST(SqliteCommit, ARefusedCommitReportsItsReason) {
  const auto file = std::filesystem::temp_directory_path() / ("sqllock-commit-test-" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(file);
  sqlite3* reader = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &reader), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(reader, "CREATE TABLE t (id INTEGER PRIMARY KEY, qty INTEGER); INSERT INTO t VALUES (1, 5)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  // A reader's open transaction (rollback journal: a SHARED lock) while the client opens the file
  // (so it stays out of WAL mode) and commits: the COMMIT needs the EXCLUSIVE lock and is refused.
  ASSERT_EQ(sqlite3_exec(reader, "BEGIN; SELECT qty FROM t", nullptr, nullptr, nullptr), SQLITE_OK);
  {
    auto c = sqllock::connect("sqlite:" + file.string(), {.require_schema = false});
    auto tx = c.begin({.lock_timeout = 100ms});
    tx.execute("UPDATE t SET qty = qty - 1 WHERE id = 1");
    try {
      tx.commit();
      ADD_FAILURE() << "the COMMIT was not refused";
    } catch (const sqllock::lock_not_available& e) {
      EXPECT_NE(std::string(e.what()).find("locked"), std::string::npos) << e.what();
    }
  }
  sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(reader, "SELECT qty FROM t WHERE id = 1", -1, &s, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(s, 0), 5) << "the refused transaction was committed";
  sqlite3_finalize(s);
  sqlite3_close(reader);
  std::filesystem::remove(file);
}
