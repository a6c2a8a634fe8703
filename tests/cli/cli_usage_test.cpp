// End-to-end tests of the `sqllock` command on SQLite (suite `cli`, split by topic over
// cli_*_test.cpp, issue 12; fixture in cli_fixture.hpp): usage errors, help and version, messages naming the flag, write errors (74), and credentials never printed.
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
// Usage, help, version: exit 0 or 64.

TEST_F(cli, version_and_help_exit_zero) {
  auto r = sqllock({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("sqllock "), std::string::npos) << r.out;
  r = sqllock({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* cmd : {"migrate", "run", "status", "release"}) {
    EXPECT_NE(r.out.find(cmd), std::string::npos) << r.out;
  }
  r = sqllock({"run", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--ttl"), std::string::npos) << r.out;
}

TEST_F(cli, usage_errors_exit_64) {
  const std::string marker = path("ran");
  const std::string touch = "touch " + marker;
  struct usage_case {
    std::string what;
    std::vector<std::string> args;
  };
  const std::vector<usage_case> cases = {
      {"no subcommand", {}},
      {"unknown subcommand", {"frobnicate"}},
      {"unknown flag", run_args("job", {"--bogus"}, touch)},
      {"bad ttl", run_args("job", {"--ttl", "5x"}, touch)},
      {"zero ttl", run_args("job", {"--ttl", "0s"}, touch)},
      {"negative wait", run_args("job", {"--wait", "-1s"}, touch)},
      {"bad grace", run_args("job", {"--grace", "soon"}, touch)},
      {"empty name", run_args("", {}, touch)},
      {"256-byte name", run_args(std::string(256, 'n'), {}, touch)},
      {"invalid UTF-8 name", run_args("bad\xff", {}, touch)},
      {"missing --name", {"run", "--url", url_, "--", "/bin/sh", "-c", touch}},
      {"missing command", {"run", "--url", url_, "--name", "job"}},
      {"bad URL scheme", {"run", "--url", "nosuch://x", "--name", "job", "--", "true"}},
      {"release without --force", {"release", "--url", url_, "--name", "job"}},
      {"release bad name", {"release", "--url", url_, "--name", "", "--force"}},
      {"status bad flag", {"status", "--url", url_, "--yaml"}},
  };
  for (const auto& c : cases) {
    const auto r = sqllock(c.args);
    EXPECT_EQ(r.exit_code, 64) << c.what << "\nstderr: " << r.err;
    EXPECT_FALSE(r.err.empty()) << c.what;
    EXPECT_TRUE(r.out.empty()) << c.what << ": " << r.out;
  }
  EXPECT_FALSE(file_exists(marker)) << "a command ran despite a usage error";
  const auto r = sqllock(run_args("job", {"--ttl", "5x"}, touch));
  EXPECT_NE(r.err.find("--ttl"), std::string::npos) << r.err;
}

TEST_F(cli, release_without_force_changes_nothing) {
  auto holder = start(run_args("stuck", {"--holder", "keeper"}, "echo x > " + path("held") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("held")));
  const auto r = sqllock({"release", "--url", url_, "--name", "stuck"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
  const auto locks = status_json();
  ASSERT_EQ(locks.items.size(), 1u);
  EXPECT_EQ(locks.items[0].at("holder").text, "keeper");
  ::kill(holder->pid(), SIGTERM);
  EXPECT_EQ(holder->wait().exit_code, 128 + SIGTERM);
}

TEST_F(cli, password_never_printed) {
  const std::string secret = "s3cr3t-pw";
  for (const std::string& url :
       {"postgresql://alice:" + secret + "@127.0.0.1:1/db?connect_timeout=1",
        "mysql://alice:" + secret + "@127.0.0.1:1/db", "postgresql://alice:" + secret + "@[bad"}) {
    for (const auto& args : std::vector<std::vector<std::string>>{{"status", "--url", url},
                                                                  {"migrate", "--url", url},
                                                                  {"release", "--url", url, "--name", "x", "--force"},
                                                                  {"run", "--url", url, "--name", "x", "--", "true"}}) {
      const auto r = sqllock(args);
      EXPECT_TRUE(r.exit_code == 64 || r.exit_code == 69) << r.exit_code << " " << r.err;
      EXPECT_EQ(r.out.find(secret), std::string::npos) << r.out;
      EXPECT_EQ(r.err.find(secret), std::string::npos) << r.err;
    }
  }
  // From the environment too.
  const auto r = sqllock({"status"}, with_env({{"SQLLOCK_URL", "postgresql://bob:" + secret + "@127.0.0.1:1/db"}}));
  EXPECT_EQ(r.err.find(secret), std::string::npos) << r.err;
}

// Every credential form, against a host or port nobody answers on, and a password holding the
// URL's delimiters: neither output stream ever shows it.
TEST_F(cli, password_in_any_form_never_printed) {
  const std::string secret = "Hunter2x";
  std::vector<std::string> urls;
  for (const std::string host : {"127.0.0.1:1", "127.0.0.1:0", "127.0.0.1:99999", "127.0.0.1:port"}) {
    urls.push_back("postgresql://alice:" + secret + "@" + host + "/db?connect_timeout=2");
    urls.push_back("postgresql://alice@" + host + "/db?password=" + secret + "&connect_timeout=2");
    urls.push_back("postgresql://alice@" + host + "/db?sslpassword=" + secret + "&connect_timeout=2");
    urls.push_back("postgresql://alice:" + secret + "?x@" + host + "/db?connect_timeout=2");
    urls.push_back("postgresql://alice:" + secret + "/x@" + host + "/db?connect_timeout=2");
    urls.push_back("postgresql://alice:" + secret + "@x:y@" + host + "/db?connect_timeout=2");
    urls.push_back("mysql://alice:" + secret + "?x/y@" + host + "/db?connect_timeout=2");
  }
  for (const auto& url : urls) {
    for (const auto& args : std::vector<std::vector<std::string>>{{"status", "--url", url}, {"migrate", "--url", url}}) {
      const auto r = sqllock(args);
      EXPECT_TRUE(r.exit_code == 64 || r.exit_code == 69) << r.exit_code << " " << r.err;
      EXPECT_EQ(r.out.find(secret), std::string::npos) << url << ": " << r.out;
      EXPECT_EQ(r.err.find(secret), std::string::npos) << url << ": " << r.err;
    }
  }
}

// migrate's success line shows the URL: with a libpq password= parameter it must not show it.
TEST_F(cli, migrate_on_postgresql_never_prints_a_password_parameter) {
  const char* env_url = std::getenv("SQLLOCK_TEST_POSTGRESQL_URL");
  ASSERT_TRUE(env_url && *env_url) << "SQLLOCK_TEST_POSTGRESQL_URL is not set (a failure, not a skip)";
  // postgresql://user:PASSWORD@host:port/db -> postgresql://user@host:port/db?password=PASSWORD
  const std::string u = env_url;
  const auto scheme_end = u.find("://") + 3;
  const auto at = u.rfind('@');
  const auto colon = u.find(':', scheme_end);
  ASSERT_TRUE(at != std::string::npos && colon < at) << "the test URL needs a password";
  const std::string password = u.substr(colon + 1, at - colon - 1);
  std::string rest = u.substr(at);  // @host:port/db[?...]
  const std::string table = "cli_pw_" + std::to_string(::getpid());
  const std::string url = u.substr(0, colon) + rest + (rest.find('?') == std::string::npos ? "?" : "&") +
                          "password=" + password + "&sqllock_table=" + table;
  for (int i = 0; i < 2; ++i) {
    const auto r = sqllock({"migrate", "--url", url});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("schema version"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(password), std::string::npos) << r.out;
    EXPECT_EQ(r.err.find(password), std::string::npos) << r.err;
  }
  const auto r = sqllock({"status", "--url", url, "--no-prepared-statements", "--no-notifications"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find(password), std::string::npos) << r.out;
}

// The library's own options as flags and as sqllock_ URL parameters.
TEST_F(cli_unmigrated, table_flag_and_url_parameter_select_the_lock_table) {
  EXPECT_EQ(sqllock({"migrate", "--url", url_, "--table", "other_locks"}).exit_code, 0);
  // The default table was not created, the named one was.
  EXPECT_EQ(sqllock({"status", "--url", url_}).exit_code, 69);
  EXPECT_EQ(sqllock({"status", "--url", url_, "--table", "other_locks"}).exit_code, 0);
  EXPECT_EQ(sqllock({"status", "--url", url_ + "?sqllock_table=other_locks"}).exit_code, 0);
  const std::string marker = path("ran");
  auto r = sqllock({"run", "--url", url_ + "?sqllock_table=other_locks&sqllock_notifications=off", "--name", "j",
                    "--no-notifications", "--no-prepared-statements", "--", "touch", marker});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(file_exists(marker));
  r = sqllock({"status", "--url", url_ + "?sqllock_bogus=1"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("sqllock_bogus"), std::string::npos) << r.err;
  r = sqllock({"status", "--url", url_, "--table", "bad-name"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  r = sqllock({"run", "--help"});
  for (const char* flag : {"--table", "--no-notifications", "--no-prepared-statements", "--allow-unsafe-durability"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
}

// Unknown commands and flags say what was wrong, with the closest match; `help` works;
// -V prints the version with the backends built in.
TEST_F(cli, unknown_commands_and_flags_name_the_mistake_and_help_works) {
  auto r = sqllock({"statsu", "--url", url_});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("unknown command 'statsu'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean 'status'?"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("subcommand is required"), std::string::npos) << r.err;

  r = sqllock({"--url", url_, "relaese", "--name", "x"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("unknown command 'relaese'; did you mean 'release'?"), std::string::npos) << r.err;

  r = sqllock({"xyzzy-nothing-like-it"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("unknown command 'xyzzy-nothing-like-it'"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;

  r = sqllock({"run", "--url", url_, "--nmae", "job", "--", "true"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("unknown option '--nmae'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean '--name'?"), std::string::npos) << r.err;

  r = sqllock({"status", "--url", url_, "--jsno"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("unknown option '--jsno' for 'status'; did you mean '--json'?"), std::string::npos) << r.err;

  r = sqllock({});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("missing command"), std::string::npos) << r.err;

  r = sqllock({"help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* cmd : {"migrate", "run", "status", "release"}) EXPECT_NE(r.out.find(cmd), std::string::npos) << r.out;
  r = sqllock({"help", "run"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--ttl"), std::string::npos) << r.out;
  r = sqllock({"help", "statsu"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("unknown command 'statsu'; did you mean 'status'?"), std::string::npos) << r.err;

  const auto version = sqllock({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  r = sqllock({"-V"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, version.out);
  EXPECT_EQ(r.out.rfind("sqllock ", 0), 0u) << r.out;
  // This build has all three backends (the test build configures them ON).
  EXPECT_NE(r.out.find("backends: sqlite postgresql mysql"), std::string::npos) << r.out;
}

// A failed write to stdout is an error (74, EX_IOERR), as in coreutils.
TEST_F(cli, output_write_errors_exit_74) {
  {
    auto p = start(run_args("held", {}, "echo x > " + path("held") + "; exec sleep 30"));
    ASSERT_TRUE(wait_for_file(path("held")));
    const std::vector<std::vector<std::string>> cases = {
        {"status", "--url", url_},  {"status", "--url", url_, "--json"}, {"--version"}, {"-V"}, {"--help"},
        {"run", "--help"},          {"help"},                            {"migrate", "--url", url_},
    };
    for (const auto& args : cases) {
      std::vector<std::string> argv{"/bin/sh", "-c", "exec \"$0\" \"$@\" >/dev/full", cli_path()};
      argv.insert(argv.end(), args.begin(), args.end());
      const auto r = run_process(argv);
      EXPECT_EQ(r.exit_code, 74) << args[0] << (args.size() > 1 ? " " + args[1] : "") << ": " << r.err;
      EXPECT_NE(r.err.find("write error"), std::string::npos) << r.err;
    }
    ::kill(p->pid(), SIGTERM);
    p->wait();
  }
  // run passes its command's output through; sqllock itself writes nothing there.
  const auto r = run_process({"/bin/sh", "-c", "exec \"$0\" \"$@\" >/dev/full", cli_path(), "run", "--url", url_,
                              "--name", "j", "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// Messages name the flag, and an authentication failure says so.
TEST_F(cli, zero_ttl_names_the_flag) {
  auto r = sqllock({"run", "--url", url_, "--name", "job", "--ttl", "0s", "--", "touch", path("ran")});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("--ttl 0s"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(path("ran")));
  r = sqllock({"migrate", "--url", url_, "--lock-ttl", "0ms"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("--lock-ttl"), std::string::npos) << r.err;
}

}  // namespace
