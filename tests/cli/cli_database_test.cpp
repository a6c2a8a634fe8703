// End-to-end tests of the `sqllock` command on SQLite (suite `cli`, split by topic over
// cli_*_test.cpp, issue 12; fixture in cli_fixture.hpp): an unreachable or unmigrated database (69), migrate, URL resolution and schemes, authentication failures, and SQLite files no reading command creates.
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "process_runner.hpp"
#include "cli_fixture.hpp"
#include "sqlite_fixture.hpp"
#include "terminal_session.hpp"

using namespace std::chrono_literals;
using namespace cli_test;

namespace {

// ---------------------------------------------------------------------------------------------
// Database unavailable or schema missing: 69.

TEST_F(cli_unmigrated, schema_missing_exits_69_and_says_migrate) {
  const std::string marker = path("ran");
  for (const auto& args : std::vector<std::vector<std::string>>{{"status", "--url", url_},
                                                                {"release", "--url", url_, "--name", "x", "--force"},
                                                                run_args("job", {}, "touch " + marker)}) {
    const auto r = sqllock(args);
    EXPECT_EQ(r.exit_code, 69) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("sqllock migrate"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(file_exists(marker));
  // And migrate fixes it.
  EXPECT_EQ(sqllock({"migrate", "--url", url_}).exit_code, 0);
  EXPECT_EQ(sqllock({"status", "--url", url_}).exit_code, 0);
}

// Lock tables a newer sqllock migrated (one version past this one's, recorded here with the
// sqlite3 shell): every command, migrate included, exits 69 saying to upgrade sqllock (not to
// migrate), runs no CMD and leaves the version as it was; once it is back, the tables serve again.
TEST_F(cli, a_schema_newer_than_this_sqllock_exits_69_says_upgrade_and_changes_nothing) {
  const std::string db = dir_ + "/locks.db";
  const auto version = [&] { return run_process({"sqlite3", db, "SELECT MAX(version) FROM sqllock_locks_schema"}).out; };
  const std::string known = version();
  ASSERT_FALSE(known.empty());
  ASSERT_EQ(run_process({"sqlite3", db,
                         "INSERT INTO sqllock_locks_schema (version, name) "
                         "SELECT MAX(version) + 1, 'from_a_newer_sqllock' FROM sqllock_locks_schema"})
                .exit_code,
            0);
  const std::string newer = version();
  ASSERT_NE(newer, known);
  const std::string marker = path("ran");
  for (const auto& args : std::vector<std::vector<std::string>>{{"status", "--url", url_},
                                                                {"release", "--url", url_, "--name", "x", "--force"},
                                                                run_args("job", {}, "touch " + marker),
                                                                {"migrate", "--url", url_}}) {
    const auto r = sqllock(args);
    EXPECT_EQ(r.exit_code, 69) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("newer"), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("upgrade sqllock"), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_EQ(r.err.find("sqllock migrate"), std::string::npos) << args[0] << ": migrate is no cure: " << r.err;
  }
  EXPECT_FALSE(file_exists(marker)) << "run ran CMD on a newer schema";
  EXPECT_EQ(version(), newer) << "the schema version was changed";
  ASSERT_EQ(run_process({"sqlite3", db, "DELETE FROM sqllock_locks_schema WHERE name = 'from_a_newer_sqllock'"}).exit_code, 0);
  EXPECT_EQ(sqllock({"status", "--url", url_}).exit_code, 0);
}

TEST_F(cli_unmigrated, unreachable_database_exits_69) {
  const std::string url = "sqlite:" + dir_ + "/no/such/dir/locks.db";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"migrate", "--url", url}, {"status", "--url", url}, {"run", "--url", url, "--name", "x", "--", "true"}}) {
    const auto r = sqllock(args);
    EXPECT_EQ(r.exit_code, 69) << args[0] << ": " << r.err;
    EXPECT_FALSE(r.err.empty());
  }
}

TEST_F(cli_unmigrated, unusable_database_file_exits_69) {
  // Tests may run as root, where permissions do not stop writes; a file that is not a SQLite
  // database is unusable for everyone.
  {
    std::ofstream garbage(dir_ + "/locks.db");
    garbage << std::string(4096, 'z');
  }
  for (const auto& args : std::vector<std::vector<std::string>>{{"migrate", "--url", url_},
                                                                {"status", "--url", url_},
                                                                {"run", "--url", url_, "--name", "x", "--", "true"}}) {
    const auto r = sqllock(args);
    EXPECT_EQ(r.exit_code, 69) << args[0] << ": " << r.err;
  }
}

// ---------------------------------------------------------------------------------------------
// migrate, URL resolution.

TEST_F(cli_unmigrated, migrate_is_idempotent_and_prints_version) {
  auto r = sqllock({"migrate", "--url", url_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("schema version"), std::string::npos) << r.out;
  r = sqllock({"migrate", "--url", url_});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("up to date"), std::string::npos) << r.out;
}

TEST_F(cli_unmigrated, migrate_from_many_processes_at_once) {
  std::vector<std::unique_ptr<background_process>> procs;
  for (int i = 0; i < 4; ++i) procs.push_back(start({"migrate", "--url", url_}));
  for (auto& p : procs) {
    const auto r = p->wait();
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  EXPECT_EQ(sqllock({"status", "--url", url_}).exit_code, 0);
}

TEST_F(cli_unmigrated, url_from_environment_then_default) {
  auto r = sqllock({"migrate"}, with_env({{"SQLLOCK_URL", "sqlite:" + dir_ + "/from_env.db"}}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(file_exists(dir_ + "/from_env.db"));
  r = sqllock({"migrate"}, in_dir(dir_));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(file_exists(dir_ + "/sqllock.db"));
  // --url wins over the environment, and is accepted before the subcommand too.
  r = sqllock({"--url", url_, "migrate"}, with_env({{"SQLLOCK_URL", "nosuch://x"}}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(file_exists(dir_ + "/locks.db"));
}

TEST_F(cli, authentication_failure_says_so) {
  for (const char* var : {"SQLLOCK_TEST_POSTGRESQL_URL", "SQLLOCK_TEST_MYSQL_URL"}) {
    const char* env_url = std::getenv(var);
    ASSERT_TRUE(env_url && *env_url) << var << " is not set (a failure, not a skip)";
    // scheme://user:PASSWORD@host... -> the same with a wrong password.
    std::string u = env_url;
    const auto colon = u.find(':', u.find("://") + 3);
    const auto at = u.rfind('@');
    ASSERT_TRUE(colon < at) << var << " needs a password";
    const std::string wrong = "wrong-Pw-" + std::to_string(::getpid());
    u = u.substr(0, colon + 1) + wrong + u.substr(at);
    const auto r = sqllock({"status", "--url", u});
    EXPECT_EQ(r.exit_code, 69) << var << ": " << r.err;
    EXPECT_NE(r.err.find("authentication failed"), std::string::npos) << var << ": " << r.err;
    EXPECT_EQ(r.err.find("cannot reach"), std::string::npos) << var << ": " << r.err;
    EXPECT_EQ(r.err.find(wrong), std::string::npos) << r.err;
  }
}

// Reading commands never create or write a SQLite database.
TEST_F(cli_unmigrated, status_on_a_missing_sqlite_file_does_not_create_it) {
  const std::string missing = dir_ + "/missing.db";
  const auto r = sqllock({"status", "--url", "sqlite:" + missing});
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sqllock migrate"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(missing));
  EXPECT_FALSE(file_exists(missing + "-sqllock-wait"));
  EXPECT_FALSE(file_exists(missing + "-wal"));
  const auto released = sqllock({"release", "--url", "sqlite:" + missing, "--name", "x", "--force"});
  EXPECT_EQ(released.exit_code, 69) << released.err;
  EXPECT_NE(released.err.find("does not exist"), std::string::npos) << released.err;
  EXPECT_FALSE(file_exists(missing));
}

// `run` needs the lock tables, so a missing SQLite file is reported, not created empty.
TEST_F(cli_unmigrated, run_on_a_missing_sqlite_file_does_not_create_it) {
  const std::string missing = dir_ + "/missing-run.db";
  const auto r = sqllock({"run", "--url", "sqlite:" + missing, "--name", "job", "true"});
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sqllock migrate --url"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(missing));
  EXPECT_FALSE(file_exists(missing + "-wal"));
  EXPECT_FALSE(file_exists(missing + "-sqllock-wait"));
}

// The hint to migrate is given once, as the exact command line.
TEST_F(cli_unmigrated, a_schema_missing_message_names_the_migrate_command_once) {
  const std::string empty = dir_ + "/empty.db";
  { std::ofstream touch(empty); }
  for (const char* command : {"status", "run"}) {
    const auto r = command == std::string("run") ? sqllock({"run", "--url", "sqlite:" + empty, "--name", "j", "true"})
                                                 : sqllock({"status", "--url", "sqlite:" + empty});
    EXPECT_EQ(r.exit_code, 69) << command << ": " << r.err;
    const auto first = r.err.find("sqllock migrate");
    ASSERT_NE(first, std::string::npos) << command << ": " << r.err;
    EXPECT_EQ(r.err.find("sqllock migrate", first + 1), std::string::npos) << command << ": " << r.err;
    EXPECT_NE(r.err.find("lock tables are missing"), std::string::npos) << command << ": " << r.err;
  }
}

// Issue 15: mariadb:// is mysql://, ssl-mode reaches the driver, sqlite:PATH?mode=ro is read-only.
TEST_F(cli, mariadb_scheme_ssl_mode_and_sqlite_mode_ro) {
  const char* env_url = std::getenv("SQLLOCK_TEST_MYSQL_URL");
  ASSERT_TRUE(env_url && std::string(env_url).rfind("mysql://", 0) == 0)
      << "SQLLOCK_TEST_MYSQL_URL is not set (a failure, not a skip)";
  const std::string maria = "mariadb://" + std::string(env_url).substr(8);
  // Migrated here, so the test does not depend on another one having run first.
  auto r = sqllock({"migrate", "--url", maria});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = sqllock({"status", "--url", maria});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = sqllock({"status", "--url", maria + "?ssl-mode=disabled"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = sqllock({"status", "--url", maria + "?ssl-mode=sometimes"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("ssl-mode"), std::string::npos) << r.err;
  // The test server offers TLS with a throwaway CA (scripts/mariadb-server.sh): verify_identity
  // with that CA connects; with another CA it is refused as unreachable (exit 69), naming the URL
  // as written.
  const char* ca = std::getenv("SQLLOCK_TEST_MYSQL_SSL_CA");
  ASSERT_TRUE(ca && *ca) << "SQLLOCK_TEST_MYSQL_SSL_CA is not set (a failure, not a skip)";
  r = sqllock({"status", "--url", maria + "?ssl-mode=verify_identity&ssl-ca=" + ca});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = sqllock({"status", "--url", maria + "?ssl-mode=verify_identity&ssl-ca=/etc/ssl/certs/ca-certificates.crt"});
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_NE(r.err.find("mariadb://"), std::string::npos) << "the URL as written: " << r.err;

  // sqlite ?mode=ro: status reads, run cannot acquire, a missing file is not created.
  auto holder = start(run_args("ro-job", {"--ttl", "20s"}, "echo x > " + path("held") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("held")));
  r = sqllock({"status", "--url", url_ + "?mode=ro"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ro-job"), std::string::npos) << r.out;
  r = sqllock({"run", "--url", url_ + "?mode=ro", "--name", "other", "--", "touch", path("ran")});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_FALSE(file_exists(path("ran")));
  r = sqllock({"status", "--url", "sqlite:" + path("missing.db") + "?mode=ro"});
  EXPECT_EQ(r.exit_code, 69) << r.err;
  // The migrate command it suggests can run (migrate refuses a read-only URL).
  EXPECT_NE(r.err.find("sqllock migrate --url 'sqlite:" + path("missing.db") + "'"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(path("missing.db")));
  EXPECT_FALSE(file_exists(path("missing.db?mode=ro")));
  r = sqllock({"status", "--url", url_ + "?mode=rwc"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("mode=rwc"), std::string::npos) << r.err;
}

}  // namespace
