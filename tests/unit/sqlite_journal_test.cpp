// The lock file's journal mode. sqllock switches the file to WAL when it opens it (readers then
// never hold up a writer's commit: an acquire, a renewal). The switch needs a moment with no other
// transaction on the file: opened while another connection held one, the file stayed in
// rollback-journal mode for as long as the client lived (the pragma's answer was not looked at),
// and every reader's open transaction went on holding up its acquires and renewals. The switch is
// tried again before each acquire until it takes.
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "sqllock/sqllock.hpp"

using namespace std::chrono_literals;

namespace {
// The file's journal mode, read by a new connection (one that is open reports its own until its
// next transaction).
std::string journal_mode(const std::filesystem::path& file) {
  sqlite3* db = nullptr;
  if (sqlite3_open(file.c_str(), &db) != SQLITE_OK) return "?";
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, nullptr) != SQLITE_OK) return "?";
  std::string mode = sqlite3_step(s) == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(s, 0)) : "?";
  sqlite3_finalize(s);
  sqlite3_close(db);
  return mode;
}
}  // namespace

TEST(SqliteJournal, AFileHeldInRollbackModeAtOpenIsSwitchedToWalOnceItCanBe) {
  const auto file = std::filesystem::temp_directory_path() / ("sqllock-journal-test-" + std::to_string(getpid()) + ".db");
  for (const char* suffix : {"", "-wal", "-shm", "-journal", "-sqllock-wait"}) std::filesystem::remove(file.string() + suffix);
  const std::string url = "sqlite:" + file.string();
  {
    auto setup = sqllock::connect(url, {.require_schema = false});
    setup.migrate();
  }
  sqlite3* reader = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &reader), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(reader, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr), SQLITE_OK);
  ASSERT_EQ(journal_mode(file), "delete");
  // Another connection's open transaction while the client opens the file (for more than the
  // 5 s busy timeout of the switch: the connect waits it out).
  ASSERT_EQ(sqlite3_exec(reader, "BEGIN; SELECT COUNT(*) FROM sqlite_master", nullptr, nullptr, nullptr), SQLITE_OK);
  auto c = sqllock::connect(url);
  EXPECT_EQ(journal_mode(file), "delete");
  ASSERT_EQ(sqlite3_exec(reader, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);

  // The reader is gone: the client's next acquire switches the file.
  auto g = c.try_acquire("journal-test");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(journal_mode(file), "wal") << "the file stayed in rollback-journal mode";
  g->release();
  sqlite3_close(reader);
  for (const char* suffix : {"", "-wal", "-shm", "-journal", "-sqllock-wait"}) std::filesystem::remove(file.string() + suffix);
}
