// Conformance: every bad input of the contract gets its typed error and changes nothing.
#include "conformance/fixture.hpp"

using namespace std::chrono_literals;
using namespace sqllock_test;

namespace {
std::size_t lock_rows_total(sqllock::client& c) {
  auto tx = c.begin();
  auto rows = tx.query("SELECT COUNT(*) FROM sqllock_locks");
  tx.commit();
  return static_cast<std::size_t>(rows.at(0).as_int(0));
}
}  // namespace

TEST(BadInput, BadLockNamesAreRefusedAndChangeNothing) {
  auto c = make_client();
  auto before = lock_rows_total(c);
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
  EXPECT_EQ(lock_rows_total(c), before);
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
