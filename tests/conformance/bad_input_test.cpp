// Conformance: every bad input of the contract gets its typed error and changes nothing.
#include <filesystem>
#include <fstream>
#include <type_traits>

#include "conformance/fixture.hpp"
#include "sqllock/migrations.hpp"

using namespace std::chrono_literals;
using namespace sqllock_test;

namespace {
std::size_t lock_rows_total(sqllock::client& c, const std::string& table) {
  auto tx = c.begin();
  auto rows = tx.query("SELECT COUNT(*) FROM " + table);
  tx.commit();
  return static_cast<std::size_t>(rows.at(0).as_int(0));
}
}  // namespace

// On a lock table of its own: the suite's other tests (run beside it in other shards by
// tests/shards.sh) add rows to the shared one.
TEST(BadInput, BadLockNamesAreRefusedAndChangeNothing) {
  const auto table = unique_name("bad_names");
  auto c = make_client({.table = table, .require_schema = false});
  ASSERT_EQ(c.migrate(), sqllock::client::required_schema_version());
  const auto before = lock_rows_total(c, table);
  const std::vector<std::string> bad = {
      "",                          // empty
      std::string(256, 'x'),       // 256 bytes
      std::string("a\0b", 3),      // NUL
      "\xff\xfe",                  // not UTF-8
      "\xc0\xaf",                  // overlong
      "\xed\xa0\x80",              // surrogate
      "abc\xe2\x82",               // truncated sequence
  };
  for (const auto& name : bad) {
    EXPECT_THROW(c.try_acquire(name), sqllock::invalid_argument) << name.size();
    EXPECT_THROW(c.try_acquire_for(name, 10ms), sqllock::invalid_argument);
    EXPECT_THROW(c.acquire(name), sqllock::invalid_argument);
    EXPECT_THROW(c.inspect(name), sqllock::invalid_argument);
    EXPECT_THROW(c.force_release(name), sqllock::invalid_argument);
  }
  EXPECT_EQ(lock_rows_total(c, table), before);
  auto tx = c.begin();
  for (const char* suffix : {"", "_schema", "_semaphores", "_queue"}) tx.execute("DROP TABLE " + table + suffix);
  tx.commit();
}

TEST(BadInput, NonPositiveTtlsAreRefusedAndChangeNothing) {
  auto c = make_client();
  auto name = unique_name("ttl");
  EXPECT_THROW(c.try_acquire(name, {.ttl = 0ms}), sqllock::invalid_argument);
  EXPECT_THROW(c.try_acquire(name, {.ttl = -5ms}), sqllock::invalid_argument);
  EXPECT_THROW(c.try_acquire_for(name, -1ms), sqllock::invalid_argument);
  EXPECT_FALSE(c.inspect(name));
}

TEST(BadInput, MalformedUrlsGetATypedErrorWithoutThePassword) {
  const std::vector<std::string> bad = {
      "",
      "ftp://host/db",
      "sqlite:",
      "sqlite://host/x.db",
      "mysql://user:s3cretpw@host",             // no database
      "mysql://user:s3cretpw@:3306/db",         // no host
      "postgresql://user:s3cretpw@host:99999/db",
      "postgresql://user:s3cretpw@host:port/db",
      "mysql://user:s3cretpw@host:3306/db?novalue",
      "mysql://user:s3cretpw@host:3306/db%zz",
      "locks.db",
  };
  for (const auto& url : bad) {
    try {
      sqllock::connect(url);
      ADD_FAILURE() << "accepted " << url;
    } catch (const sqllock::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).find("s3cretpw"), std::string::npos) << e.what();
    }
  }
}

TEST(BadInput, InvalidTableNamesAreRefused) {
  for (std::string table : std::vector<std::string>{"", "1abc", "locks; DROP TABLE x", "a.b.c", "\"quoted\"", std::string(64, 'a')}) {
    EXPECT_THROW(make_client({.table = table}), sqllock::invalid_argument) << table;
  }
}

TEST(BadInput, AMissingSchemaIsAClearTypedError) {
  try {
    make_client({.table = unique_name("no_such_table")});
    FAIL() << "connected without lock tables";
  } catch (const sqllock::schema_missing& e) {
    EXPECT_NE(std::string(e.what()).find("migrate"), std::string::npos) << e.what();
    EXPECT_EQ(e.backend(), hooks().name);
  }
}

// An old sqllock against lock tables a newer one migrated (version required + 1 recorded here) must
// not run statements whose meaning may have changed: connect() and migrate() refuse with
// schema_too_new (a schema_missing: the CLI's exit 69), naming both versions and the cure
// (upgrade sqllock, not `sqllock migrate`), and change nothing; so does the migration runner,
// which used to skip migrate() and go on. Once the version is back, the tables serve again.
static_assert(std::is_base_of_v<sqllock::schema_missing, sqllock::schema_too_new>);
TEST(BadInput, ASchemaNewerThanThisLibraryIsRefusedAndLeftAsItWas) {
  const auto table = unique_name("newer");
  const int known = sqllock::client::required_schema_version();
  const int newer = known + 1;
  auto c = make_client({.table = table, .require_schema = false});
  ASSERT_EQ(c.migrate(), known);
  {
    auto tx = c.begin();
    tx.execute(record_version_sql(c.dialect(), table + "_schema", newer));
    tx.commit();
  }
  ASSERT_EQ(c.schema_version(), newer);

  try {
    make_client({.table = table});
    ADD_FAILURE() << "connected to lock tables at schema version " << newer << " with a library that knows " << known;
  } catch (const sqllock::schema_too_new& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.found_version(), newer);
    EXPECT_EQ(e.known_version(), known);
    EXPECT_EQ(e.backend(), hooks().name);
    EXPECT_NE(what.find("version " + std::to_string(newer)), std::string::npos) << what;
    EXPECT_NE(what.find("upgrade sqllock"), std::string::npos) << what;
    EXPECT_EQ(what.find("sqllock migrate"), std::string::npos) << "migrate is no cure: " << what;
  }
  EXPECT_THROW(c.migrate(), sqllock::schema_too_new);
  EXPECT_EQ(c.schema_version(), newer) << "migrate changed the version of a newer schema";

  const auto dir = std::filesystem::temp_directory_path() / unique_name("newer_migrations");
  std::filesystem::create_directories(dir);
  const auto user_table_name = unique_name("newer_user");
  std::ofstream(dir / "0001_create.sql") << "CREATE TABLE " << user_table_name << " (id INTEGER PRIMARY KEY);\n";
  const auto history = unique_name("newer_history");
  EXPECT_THROW(sqllock::migrate_directory(c, dir, {.history_table = history}), sqllock::schema_too_new);
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(c.inspect("sqllock:migrations:" + history)) << "the migration runner took its lease";
  EXPECT_THROW(
      {
        auto tx = c.begin();
        tx.query("SELECT COUNT(*) FROM " + user_table_name);
      },
      sqllock::error)
      << "the migration runner applied a migration on a newer lock schema";

  {  // restore: the tables serve this library again
    auto tx = c.begin();
    tx.execute("DELETE FROM " + table + "_schema WHERE version = " + std::to_string(newer));
    tx.commit();
  }
  auto again = make_client({.table = table});
  EXPECT_TRUE(again.try_acquire(unique_name("after_restore")));
  auto tx = c.begin();
  for (const char* suffix : {"", "_schema", "_semaphores", "_queue"}) tx.execute("DROP TABLE " + table + suffix);
  tx.commit();
}

TEST(BadInput, MigrateIsIdempotentAndCustomTablesWork) {
  auto table = unique_name("custom_locks");
  auto c = make_client({.table = table, .require_schema = false});
  EXPECT_EQ(c.schema_version(), 0);
  EXPECT_EQ(c.migrate(), sqllock::client::required_schema_version());
  EXPECT_EQ(c.migrate(), sqllock::client::required_schema_version());
  auto d = make_client({.table = table});
  auto g = d.try_acquire("x");
  ASSERT_TRUE(g);
  EXPECT_EQ(d.inspect("x")->holder, d.holder_id());
  auto other = make_client();  // the default table knows nothing of the custom one
  auto info = other.inspect("x");
  EXPECT_TRUE(!info || info->holder != d.holder_id());
}

// A key is an exact value: a number with space around it (" 1", "1 ", "\t1") is no key of a number
// column. PostgreSQL's bigint input and SQLite's type affinity trimmed it and selected row 1, MariaDB
// refused it: every backend refuses it now (invalid_argument naming the column) before any write or
// lock, and the transaction goes on. On a text column such a key is the text it is.
TEST(BadInput, ANumberWithSpaceAroundItIsNoKeyOfANumberColumn) {
  auto c = make_client();
  user_table t(c, {{1, 10}});
  const auto text_table = unique_name("text_keys");
  {
    auto tx = c.begin();
    tx.execute("CREATE TABLE " + text_table + " (id VARCHAR(20) PRIMARY KEY, qty BIGINT NOT NULL, version BIGINT)");
    tx.execute("INSERT INTO " + text_table + " VALUES (' 1', 10, 1)");
    tx.commit();
  }
  auto tx = c.begin();
  for (const std::string key : {" 1", "1 ", "\t1", " 1 "}) {
    const std::string what = "key '" + key + "'";
    EXPECT_THROW(tx.cas({.table = t.name(), .key = {{"id", key}}, .expected_version = 1,
                         .set = {{"qty", std::int64_t{99}}}}),
                 sqllock::invalid_argument)
        << "cas, " << what;
    EXPECT_THROW(tx.fenced_update({.table = t.name(), .key = {{"id", key}}, .fence_column = "version", .token = 5,
                                   .set = {{"qty", std::int64_t{99}}}}),
                 sqllock::invalid_argument)
        << "fenced_update, " << what;
    EXPECT_THROW(tx.lock_rows({.table = t.name(), .key_column = "id", .keys = {std::int64_t{1}, key}}),
                 sqllock::invalid_argument)
        << "lock_rows, " << what;
  }
  try {
    tx.lock_rows({.table = t.name(), .key_column = "id", .keys = {std::string(" 1")}});
  } catch (const sqllock::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("column id"), std::string::npos) << e.what();
  }
  // On a text column it is a key like any other; and the transaction went on.
  auto locked = tx.lock_rows({.table = text_table, .key_column = "id", .keys = {std::string(" 1")}});
  ASSERT_TRUE(locked.acquired());
  EXPECT_EQ(locked.rows.size(), 1u);
  EXPECT_TRUE(tx.cas({.table = text_table, .key = {{"id", std::string(" 1")}}, .expected_version = 1,
                      .set = {{"qty", std::int64_t{11}}}})
                  .applied());
  EXPECT_TRUE(tx.cas({.table = t.name(), .key = {{"id", std::int64_t{1}}}, .expected_version = 1,
                      .set = {{"qty", std::int64_t{12}}}})
                  .applied());
  tx.commit();
  auto drop = c.begin();
  EXPECT_EQ(drop.query("SELECT qty FROM " + text_table).at(0).as_int(0), 11);
  drop.execute("DROP TABLE " + text_table);
  drop.commit();
  EXPECT_EQ(t.qty(1), 12);
  EXPECT_EQ(t.version(1), 2);
}
