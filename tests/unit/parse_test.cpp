// Unit tests of input validation: URLs, durations, lock names, TTLs, identifiers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "sqllock/error.hpp"
#include "sqllock/parse.hpp"
#include "sqllock/sqllock.hpp"

using namespace std::chrono_literals;
using sqllock::database_url;

TEST(ParseUrl, SqliteForms) {
  EXPECT_EQ(sqllock::parse_url("sqlite:locks.db").path, "locks.db");
  EXPECT_EQ(sqllock::parse_url("sqlite:/var/lib/app/locks.db").path, "/var/lib/app/locks.db");
  EXPECT_EQ(sqllock::parse_url("sqlite:///abs/path.db").path, "/abs/path.db");
  EXPECT_EQ(sqllock::parse_url("sqlite::memory:").path, ":memory:");
  EXPECT_EQ(sqllock::parse_url("sqlite:locks.db").scheme, database_url::kind::sqlite);
}

TEST(ParseUrl, ServerForms) {
  auto u = sqllock::parse_url("mysql://app:p%40ss@db.example:3307/shop?ssl-mode=REQUIRED");
  EXPECT_EQ(u.scheme, database_url::kind::mysql);
  EXPECT_EQ(u.user, "app");
  EXPECT_EQ(u.password, "p@ss");
  EXPECT_EQ(u.host, "db.example");
  EXPECT_EQ(u.port, 3307);
  EXPECT_EQ(u.database, "shop");
  EXPECT_EQ(u.params.at("ssl-mode"), "REQUIRED");
  auto p = sqllock::parse_url("postgres://u@[::1]:5433/db");
  EXPECT_EQ(p.scheme, database_url::kind::postgresql);
  EXPECT_EQ(p.host, "::1");
  EXPECT_EQ(p.port, 5433);
  EXPECT_EQ(sqllock::parse_url("postgresql://localhost/db").port, 0);
  EXPECT_EQ(sqllock::parse_url("postgresql:///db?host=/tmp").params.at("host"), "/tmp");
}

TEST(ParseUrl, RedactedNeverShowsThePassword) {
  auto u = sqllock::parse_url("postgresql://app:hunter2@db:5432/x?sslmode=require");
  EXPECT_EQ(u.redacted(), "postgresql://app:***@db:5432/x?sslmode=require");
  EXPECT_EQ(sqllock::parse_url("mysql://app:a:b@c@db/x").redacted(), "mysql://app:***@db/x");
  EXPECT_EQ(sqllock::parse_url("mysql://app@db/x").redacted(), "mysql://app@db/x");
}

// Found by fuzz_url in CI: a sqlite URL whose unknown parameter name held a whole server URL had
// that URL's password quoted back in the rejection message.
TEST(ParseUrl, ARejectionNeverQuotesThePasswordOfAUrlPastedInsideAnother) {
  for (const std::string url : {std::string("sqlite:/tmp/x.db?sqllock_a=1&bogus postgresql://app:Sekr1tPw@db.example:5432/app=1"),
                                std::string("sqlite:/tmp/x.db?mode=mysql://u:Sekr1tPw@h/db"),
                                std::string("sqlite:/tmp/x.db?sqllock_a=1&x://:Sekr1tPw@=1"),
                                // Passwords may hold '#', '/' and '?' (the parser reads them so): the
                                // fuzzer's find in CI was "?mode=r,://app:s#cret@db.exa,...".
                                std::string("sqlite:/tmp/x.db?mode=r,://app:Sekr#1tPw@db.exa,a"),
                                std::string("sqlite:/tmp/x.db?mode=x://u:Sekr/1tPw@h"),
                                std::string("sqlite:/tmp/x.db?mode=x://u:Sekr?1=tPw@h")}) {
    try {
      sqllock::parse_url(url);
      ADD_FAILURE() << "accepted: " << url;
    } catch (const sqllock::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find("Sekr1t"), std::string::npos) << what;
      EXPECT_EQ(what.find("Sekr"), std::string::npos) << "a truncated password is still a leak: " << what;
    }
  }
}

TEST(ParseUrl, PasswordsWithDelimitersAreReadAsPasswords) {
  // The user-info ends at the last '@' before the host, so '?', '/', '@' and ':' stay in the password.
  for (const std::string pw : {"hun?ter2", "hun/ter2", "p@ss:w/rd?x=1", "a:b@c", "x?y/z@w"}) {
    for (const std::string scheme : {"postgresql", "mysql"}) {
      const auto u = sqllock::parse_url(scheme + "://app:" + pw + "@db.example:5432/shop?connect_timeout=3");
      EXPECT_EQ(u.password, pw);
      EXPECT_EQ(u.user, "app");
      EXPECT_EQ(u.host, "db.example");
      EXPECT_EQ(u.port, 5432);
      EXPECT_EQ(u.database, "shop");
      EXPECT_EQ(u.params.at("connect_timeout"), "3");
      EXPECT_EQ(u.redacted(), scheme + "://app:***@db.example:5432/shop?connect_timeout=3");
    }
  }
  // Percent-encoding keeps working.
  EXPECT_EQ(sqllock::parse_url("postgresql://app:hun%2Fter%3F2%40x@db/x").password, "hun/ter?2@x");
  // No password: '@' in a query value or after a port stays in the query.
  auto q = sqllock::parse_url("postgresql://app:pw@db/x?application_name=job@node1");
  EXPECT_EQ(q.password, "pw");
  EXPECT_EQ(q.host, "db");
  EXPECT_EQ(q.params.at("application_name"), "job@node1");
  auto n = sqllock::parse_url("postgresql://db:5432/x?application_name=job@node1");
  EXPECT_EQ(n.user, "");
  EXPECT_EQ(n.host, "db");
  EXPECT_EQ(n.params.at("application_name"), "job@node1");
  auto m = sqllock::parse_url("postgresql://db/x?application_name=a@b");
  EXPECT_EQ(m.user, "");
  EXPECT_EQ(m.params.at("application_name"), "a@b");
  // Ambiguous (a password "1234/x?y=z" or "x@h/db?k=v", or a query value): refused, never shown.
  for (const std::string url : {"postgresql://admin:1234/x?y=z@dbhost/db", "postgresql://u:x@h/db?k=v@realhost/db"}) {
    try {
      sqllock::parse_url(url);
      ADD_FAILURE() << "accepted " << url;
    } catch (const sqllock::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).find("1234/x"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("realhost"), std::string::npos) << e.what();
    }
  }
}

TEST(ParseUrl, SecretParametersAreRedactedAndIdentifiersStay) {
  const auto u = sqllock::parse_url(
      "postgresql://app@db.example:5432/acc?sslmode=require&password=Hunter2x&sslpassword=K3yPass&"
      "sqllock_table=jobs");
  const std::string r = u.redacted();
  EXPECT_EQ(r.find("Hunter2x"), std::string::npos) << r;
  EXPECT_EQ(r.find("K3yPass"), std::string::npos) << r;
  EXPECT_NE(r.find("password=***"), std::string::npos) << r;
  EXPECT_NE(r.find("sslpassword=***"), std::string::npos) << r;
  for (const char* readable : {"app@", "db.example:5432", "/acc", "sslmode=require", "sqllock_table=jobs"}) {
    EXPECT_NE(r.find(readable), std::string::npos) << readable << " in " << r;
  }
  const auto both = sqllock::parse_url("postgres://app:Hunter2x@db/acc?password=Hunter2x");
  EXPECT_EQ(both.redacted().find("Hunter2x"), std::string::npos) << both.redacted();
  EXPECT_EQ(both.redacted().rfind("postgres://", 0), 0u) << both.redacted();
}

TEST(ParseUrl, ErrorsNeverRepeatAPasswordInAnyForm) {
  const std::string pw = "Hunter2x";
  for (const std::string& bad :
       {"postgresql://u:" + pw + "?@db:0/x", "postgresql://u:" + pw + "/x@db:abc/x", "mysql://u:" + pw + "@h:65536/db",
        "postgresql://u:" + pw + "?@[::1/x", "postgresql://u:p@db/x?" + pw, "postgresql://u:" + pw + "%zz@db/x",
        "mysql://u:" + pw + "?a@h:12a/db", "postgresql://u:" + pw + "@db:/x"}) {
    try {
      sqllock::parse_url(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const sqllock::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).find(pw), std::string::npos) << bad << " -> " << e.what();
    }
  }
}

TEST(ConnectUrlOptions, UnknownOrBadSqllockParametersAreInvalidArguments) {
  for (const std::string& url :
       {std::string("sqlite::memory:?sqllock_foo=1"), std::string("sqlite::memory:?sqllock_notifications=maybe"),
        std::string("sqlite::memory:?sqllock_table=bad-name")}) {
    try {
      sqllock::connect(url, {.require_schema = false});
      ADD_FAILURE() << "accepted: " << url;
    } catch (const sqllock::invalid_argument& e) {
      const std::string key = url.substr(url.find('?') + 1, url.find('=') - url.find('?') - 1);
      if (key != "sqllock_table") EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
  // Known ones are taken off the URL, and win over client_options: the table named there is used.
  const std::string file =
      (std::filesystem::temp_directory_path() / ("sqllock_url_opts_" + std::to_string(::getpid()) + ".db")).string();
  std::filesystem::remove(file);
  {
    auto c = sqllock::connect("sqlite:" + file + "?sqllock_table=url_jobs&sqllock_notifications=off",
                              {.table = "ignored_table", .require_schema = false});
    c.migrate();
    EXPECT_TRUE(c.try_acquire("job"));
  }
  EXPECT_NO_THROW(sqllock::connect("sqlite:" + file, {.table = "url_jobs"}));
  EXPECT_THROW(sqllock::connect("sqlite:" + file, {.table = "ignored_table"}), sqllock::schema_missing);
  EXPECT_THROW(sqllock::connect("sqlite:" + file), sqllock::schema_missing);
  std::filesystem::remove(file);
  std::filesystem::remove(file + "-wal");
  std::filesystem::remove(file + "-shm");
  std::filesystem::remove(file + "-sqllock-wait");
}

// Found by fuzz_url: an escaped '@' or ':' in a host read back from redacted() as user-info or
// port, and a bracketed host was written back with raw bytes; libpq's host list keeps working.
TEST(ParseUrl, HostsReadBackFromRedactedAsTheSameHost) {
  auto list = sqllock::parse_url("postgresql://u:pw@h1:5432,h2:5433/db");
  EXPECT_EQ(list.host, "h1:5432,h2");
  EXPECT_EQ(list.port, 5433);
  EXPECT_EQ(sqllock::parse_url(list.redacted()).host, list.host);
  auto v6 = sqllock::parse_url("postgresql://u:pw@[::f%ff1]:5432/db");
  auto back = sqllock::parse_url(v6.redacted());
  EXPECT_EQ(back.host, v6.host);
  EXPECT_EQ(back.password, "***");
  EXPECT_THROW(sqllock::parse_url("mysql://user:pw:40%40x127.0.0.1:3306/db"), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::parse_url("mysql://a%3Ab:3306/db"), sqllock::invalid_argument);
  auto socket = sqllock::parse_url("postgresql://u:pw@%2Fvar%2Frun%2Fpostgresql/db");
  EXPECT_EQ(socket.host, "/var/run/postgresql");
  EXPECT_EQ(sqllock::parse_url(socket.redacted()).host, socket.host);
}

TEST(ParseUrl, BadUrlsAreInvalidArguments) {
  for (const char* bad : {"", "sqlite:", "sqlite://h/x", "http://x/y", "mysql://h", "mysql://u:pw@h:0/db",
                          "mysql://u:pw@h:65536/db", "mysql://u:pw@h:12a/db", "postgresql://u:pw@h:/db",
                          "mysql://u:pw@h/db?=x", "mysql://u:pw@h/d%2", "mysql://u:pw@[::1/db", "sqlite:/"}) {
    try {
      sqllock::parse_url(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const sqllock::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).find("pw@"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(sqllock::parse_url(std::string("sqlite:a\0b", 10)), sqllock::invalid_argument);
}

TEST(ParseUrl, MariadbSchemeIsMysql) {
  const auto u = sqllock::parse_url("mariadb://app:Hunter2x@db.example:3307/shop?connect_timeout=3");
  EXPECT_EQ(u.scheme, database_url::kind::mysql);
  EXPECT_EQ(u.user, "app");
  EXPECT_EQ(u.password, "Hunter2x");
  EXPECT_EQ(u.host, "db.example");
  EXPECT_EQ(u.port, 3307);
  EXPECT_EQ(u.database, "shop");
  EXPECT_EQ(u.params.at("connect_timeout"), "3");
  // Redacted as written (the scheme the user typed), without the password.
  EXPECT_EQ(u.redacted(), "mariadb://app:***@db.example:3307/shop?connect_timeout=3");
  EXPECT_EQ(sqllock::parse_url(u.redacted()).scheme, database_url::kind::mysql);
  // Same rules as mysql://: a host and a database are needed, and errors name the scheme written.
  for (const char* bad : {"mariadb://h", "mariadb://u:pw@/db", "mariadb://u:pw@h:0/db", "mariadb:/h/db"}) {
    try {
      sqllock::parse_url(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const sqllock::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).find("pw@"), std::string::npos) << e.what();
    }
  }
  try {
    sqllock::parse_url("mariadb://u:pw@h");
    ADD_FAILURE() << "accepted a URL without a database";
  } catch (const sqllock::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("mariadb://"), std::string::npos) << e.what();
  }
  try {
    sqllock::parse_url("maria://h/db");
    ADD_FAILURE() << "accepted an unknown scheme";
  } catch (const sqllock::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("mariadb://"), std::string::npos) << "the list of schemes: " << e.what();
  }
}

TEST(ParseUrl, SqliteModeQuery) {
  const auto ro = sqllock::parse_url("sqlite:/var/lib/app/locks.db?mode=ro");
  EXPECT_EQ(ro.path, "/var/lib/app/locks.db");
  EXPECT_EQ(ro.params.at("mode"), "ro");
  const auto rw = sqllock::parse_url("sqlite:///abs/path.db?sqllock_table=jobs&mode=rw");
  EXPECT_EQ(rw.path, "/abs/path.db");
  EXPECT_EQ(rw.params.at("mode"), "rw");
  EXPECT_EQ(rw.params.at("sqllock_table"), "jobs");
  // A '?' that does not start a key=value query stays part of the file name.
  EXPECT_EQ(sqllock::parse_url("sqlite:odd?name.db").path, "odd?name.db");
  EXPECT_THROW(sqllock::parse_url("sqlite:x.db?sqllock_table=a&junk"), sqllock::invalid_argument);
  // Other modes (SQLite's rwc, memory) and other SQLite URI parameters are refused, naming them.
  for (const std::string& bad : {"sqlite:locks.db?mode=rwc", "sqlite:locks.db?mode=memory", "sqlite:locks.db?mode=",
                                 "sqlite:locks.db?mode=RO&mode=bogus", "sqlite:locks.db?cache=shared",
                                 "sqlite:locks.db?mode=ro&vfs=unix-none"}) {
    try {
      sqllock::parse_url(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const sqllock::invalid_argument& e) {
      const std::string what = e.what();
      const std::string named = bad.find("cache") != std::string::npos ? "cache"
                                : bad.find("vfs") != std::string::npos ? "vfs"
                                                                        : "mode";
      EXPECT_NE(what.find(named), std::string::npos) << bad << " -> " << what;
    }
  }
}

// sqlite:PATH?mode=ro is a read-only client (client_options::read_only): it lists the locks of an
// existing file, cannot acquire, and never creates a missing file.
TEST(ConnectUrlOptions, SqliteModeRoIsAReadOnlyClient) {
  const std::string file =
      (std::filesystem::temp_directory_path() / ("sqllock_url_ro_" + std::to_string(::getpid()) + ".db")).string();
  const auto cleanup = [&] {
    for (const char* suffix : {"", "-wal", "-shm", "-sqllock-wait"}) std::filesystem::remove(file + suffix);
  };
  cleanup();
  // A missing file: not created, whatever the client's own options say.
  EXPECT_THROW(sqllock::connect("sqlite:" + file + "?mode=ro"), sqllock::schema_missing);
  EXPECT_THROW(sqllock::connect("sqlite:" + file + "?mode=ro", {.require_schema = false}), sqllock::schema_missing);
  EXPECT_FALSE(std::filesystem::exists(file)) << "mode=ro created " << file;
  {
    auto writer = sqllock::connect("sqlite:" + file, {.require_schema = false});
    writer.migrate();
    auto held = writer.try_acquire("ro-held", {.ttl = 60s});
    ASSERT_TRUE(held);
    auto reader = sqllock::connect("sqlite:" + file + "?mode=ro");
    const auto locks = reader.list_locks();
    ASSERT_EQ(locks.size(), 1u);
    EXPECT_EQ(locks.front().name, "ro-held");
    EXPECT_THROW((void)reader.try_acquire("ro-other"), sqllock::invalid_argument);
    EXPECT_THROW(reader.migrate(), sqllock::invalid_argument);
    // mode=rw is the default: a read-write client.
    auto rw = sqllock::connect("sqlite:" + file + "?mode=rw");
    EXPECT_TRUE(rw.try_acquire("rw-free"));
  }
  cleanup();
}

TEST(ParseDuration, Units) {
  EXPECT_EQ(sqllock::parse_duration("500ms"), 500ms);
  EXPECT_EQ(sqllock::parse_duration("30s"), 30s);
  EXPECT_EQ(sqllock::parse_duration("5m"), 5min);
  EXPECT_EQ(sqllock::parse_duration("1h"), 1h);
  EXPECT_EQ(sqllock::parse_duration("0s"), 0ms);
}

TEST(ParseDuration, BadDurations) {
  for (const char* bad : {"", "s", "10", "-5s", "1.5s", "10 s", "10sec", "5d", "99999999999999999999s", "1e3ms",
                          "100000h", " 1s", "1s "}) {
    EXPECT_THROW(sqllock::parse_duration(bad), sqllock::invalid_argument) << bad;
  }
}

TEST(LockName, Validation) {
  EXPECT_NO_THROW(sqllock::validate_lock_name("a"));
  EXPECT_NO_THROW(sqllock::validate_lock_name(std::string(255, 'x')));
  EXPECT_NO_THROW(sqllock::validate_lock_name("\xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x94\x92"));
  EXPECT_NO_THROW(sqllock::validate_lock_name("'; DROP TABLE x; --"));
  EXPECT_THROW(sqllock::validate_lock_name(""), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::validate_lock_name(std::string(256, 'x')), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::validate_lock_name(std::string("a\0", 2)), sqllock::invalid_argument);
  for (const char* bad : {"\x80", "\xC3", "\xC3\x28", "\xE0\x80\xAF", "\xF4\x90\x80\x80", "\xED\xBF\xBF", "\xF8\x88\x80\x80\x80"}) {
    EXPECT_THROW(sqllock::validate_lock_name(bad), sqllock::invalid_argument) << bad;
  }
}

TEST(Ttl, Validation) {
  EXPECT_NO_THROW(sqllock::validate_ttl(1ms));
  EXPECT_THROW(sqllock::validate_ttl(0ms), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::validate_ttl(-1ms), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::validate_ttl(std::chrono::hours(24 * 366 * 11)), sqllock::invalid_argument);
  EXPECT_NO_THROW(sqllock::validate_permits(1));
  EXPECT_NO_THROW(sqllock::validate_permits(10000));
  EXPECT_THROW(sqllock::validate_permits(0), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::validate_permits(10001), sqllock::invalid_argument);
  EXPECT_THROW(sqllock::validate_permits(-1), sqllock::invalid_argument);
}

TEST(Identifier, ValidationAndQuoting) {
  EXPECT_EQ(sqllock::quote_identifier("stock", sqllock::dialect::postgresql), "\"stock\"");
  EXPECT_EQ(sqllock::quote_identifier("shop.stock", sqllock::dialect::postgresql), "\"shop\".\"stock\"");
  EXPECT_EQ(sqllock::quote_identifier("shop.stock", sqllock::dialect::mysql), "`shop`.`stock`");
  EXPECT_EQ(sqllock::quote_identifier("_x1", sqllock::dialect::sqlite), "\"_x1\"");
  for (const char* bad : {"", "1x", "a-b", "a b", "a.b.c", ".a", "a.", "a\"b", "a`b", "a;b", "\xC3\xA9"}) {
    EXPECT_THROW(sqllock::quote_identifier(bad, sqllock::dialect::mysql), sqllock::invalid_argument) << bad;
  }
  EXPECT_NO_THROW(sqllock::validate_identifier(std::string(63, 'a')));
  EXPECT_THROW(sqllock::validate_identifier(std::string(64, 'a')), sqllock::invalid_argument);
}
