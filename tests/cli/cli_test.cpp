// End-to-end tests of the `sqllock` command on SQLite: exit codes, environment, signals, loss,
// waiting, status output and mutual exclusion across processes.
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
#include "sqlite_fixture.hpp"
#include "terminal_session.hpp"

using namespace std::chrono_literals;
using namespace cli_test;

namespace {

// ---------------------------------------------------------------------------------------------
// A small JSON reader, enough for `status --json` (arrays, objects, strings, integers).
struct json_value {
  enum class kind { null, boolean, number, string, array, object } type = kind::null;
  long long number = 0;
  std::string text;
  std::vector<json_value> items;
  std::vector<std::pair<std::string, json_value>> members;

  const json_value& at(const std::string& key) const {
    for (const auto& [k, v] : members) {
      if (k == key) return v;
    }
    throw std::runtime_error("missing key " + key);
  }
};

class json_reader {
 public:
  explicit json_reader(std::string_view s) : s_(s) {}
  json_value parse_document() {
    json_value v = value();
    skip_space();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("bad JSON at " + std::to_string(i_) + ": " + what);
  }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool consume(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected ") + c);
  }
  json_value value() {
    skip_space();
    if (i_ >= s_.size()) fail("unexpected end");
    json_value v;
    const char c = s_[i_];
    if (c == '[') {
      ++i_;
      v.type = json_value::kind::array;
      if (consume(']')) return v;
      do v.items.push_back(value());
      while (consume(','));
      expect(']');
    } else if (c == '{') {
      ++i_;
      v.type = json_value::kind::object;
      if (consume('}')) return v;
      do {
        skip_space();
        std::string key = string();
        expect(':');
        v.members.emplace_back(std::move(key), value());
      } while (consume(','));
      expect('}');
    } else if (c == '"') {
      v.type = json_value::kind::string;
      v.text = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.type = json_value::kind::number;
      std::size_t used = 0;
      v.number = std::stoll(std::string(s_.substr(i_, 24)), &used);
      i_ += used;
    } else if (s_.substr(i_, 4) == "true" || s_.substr(i_, 4) == "null") {
      v.type = s_[i_] == 't' ? json_value::kind::boolean : json_value::kind::null;
      i_ += 4;
    } else if (s_.substr(i_, 5) == "false") {
      v.type = json_value::kind::boolean;
      i_ += 5;
    } else {
      fail("unexpected character");
    }
    return v;
  }
  unsigned hex4() {
    if (i_ + 4 > s_.size()) fail("short \\u escape");
    const unsigned v = static_cast<unsigned>(std::stoul(std::string(s_.substr(i_, 4)), nullptr, 16));
    i_ += 4;
    return v;
  }
  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  std::string string() {
    if (i_ >= s_.size() || s_[i_] != '"') fail("expected string");
    ++i_;
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return out;
      if (c < 0x20) fail("raw control character in string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (i_ >= s_.size()) fail("dangling backslash");
      const char e = s_[i_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (s_.substr(i_, 2) != "\\u") fail("lone high surrogate");
            i_ += 2;
            const unsigned low = hex4();
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }
  std::string_view s_;
  std::size_t i_ = 0;
};

json_value parse_json(const std::string& text) { return json_reader(text).parse_document(); }

/// True when `pid` no longer runs (gone, or a zombie waiting for whoever reaps orphans).
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

process_options with_env(std::map<std::string, std::string> env) {
  process_options options;
  options.env = std::move(env);
  return options;
}

process_options in_dir(const std::string& dir) {
  process_options options;
  options.cwd = dir;
  return options;
}

// ---------------------------------------------------------------------------------------------
// Fixture: a fresh temporary directory with a migrated SQLite lock database.

class cli : public sqlite_fixture {
 protected:
  json_value status_json() {
    const auto r = sqllock({"status", "--url", url_, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return parse_json(r.out);
  }
};

class cli_unmigrated : public cli {
 protected:
  bool migrate_in_setup() const override { return false; }
};

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

// ---------------------------------------------------------------------------------------------
// run: exit codes and environment.

TEST_F(cli, run_passes_on_command_exit_code) {
  EXPECT_EQ(sqllock(run_args("job", {}, "exit 0")).exit_code, 0);
  EXPECT_EQ(sqllock(run_args("job", {}, "exit 7")).exit_code, 7);
  EXPECT_EQ(sqllock(run_args("job", {}, "exit 75")).exit_code, 75);
  // Died of a signal: 128 + signal, like a shell.
  EXPECT_EQ(sqllock(run_args("job", {}, "kill -KILL $$")).exit_code, 128 + SIGKILL);
  EXPECT_EQ(sqllock(run_args("job", {}, "kill -TERM $$")).exit_code, 128 + SIGTERM);
  EXPECT_EQ(status_json().items.size(), 0u) << "the lock must be released after each run";
}

TEST_F(cli, run_exec_failures_exit_127_and_126) {
  auto r = sqllock({"run", "--url", url_, "--name", "job", "--", dir_ + "/no-such-command"});
  EXPECT_EQ(r.exit_code, 127) << r.err;
  EXPECT_NE(r.err.find("no-such-command"), std::string::npos) << r.err;
  r = sqllock({"run", "--url", url_, "--name", "job", "--", "sqllock-no-such-command-in-path"});
  EXPECT_EQ(r.exit_code, 127) << r.err;
  const std::string not_executable = dir_ + "/not-executable";
  {
    std::ofstream f(not_executable);
    f << "#!/bin/sh\nexit 0\n";
  }
  ::chmod(not_executable.c_str(), 0644);
  r = sqllock({"run", "--url", url_, "--name", "job", "--", not_executable});
  EXPECT_EQ(r.exit_code, 126) << r.err;
  EXPECT_EQ(status_json().items.size(), 0u) << "the lock must be released after a failed exec";
}

TEST_F(cli, run_sets_fence_and_holder_in_environment) {
  auto r = sqllock(
      run_args("job", {"--holder", "job-42"},
               "echo \"$SQLLOCK_FENCE\" > " + path("fence") + "; echo \"$SQLLOCK_HOLDER\" > " + path("holder")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(trimmed_file("holder"), "job-42");
  const long long fence = std::stoll(trimmed_file("fence"));
  EXPECT_GE(fence, 1);

  // Without --holder: a generated, non-empty id; and the next acquisition gets a larger fence.
  r = sqllock(run_args(
      "job", {}, "echo \"$SQLLOCK_FENCE\" > " + path("fence2") + "; echo \"$SQLLOCK_HOLDER\" > " + path("holder2")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(trimmed_file("holder2").empty());
  EXPECT_NE(trimmed_file("holder2"), "job-42");
  EXPECT_GT(std::stoll(trimmed_file("fence2")), fence);
}

TEST_F(cli, inherited_values_of_fence_variables_are_replaced) {
  const auto r =
      sqllock(run_args("job", {"--holder", "real"}, "echo \"$SQLLOCK_FENCE $SQLLOCK_HOLDER\" > " + path("env")),
              with_env({{"SQLLOCK_FENCE", "999999"}, {"SQLLOCK_HOLDER", "fake"}}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string env = trimmed_file("env");
  EXPECT_EQ(env.find("999999"), std::string::npos) << env;
  EXPECT_NE(env.find(" real"), std::string::npos) << env;
}

// ---------------------------------------------------------------------------------------------
// run: contention, waiting (75) and fences.

TEST_F(cli, busy_lock_exits_75_naming_the_holder) {
  auto holder = start(
      run_args("job", {"--holder", "alice-holder", "--ttl", "20s"}, "echo x > " + path("held") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("held")));

  auto r = sqllock(run_args("job", {"--wait", "0s"}, "touch " + path("second-ran")));
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_NE(r.err.find("alice-holder"), std::string::npos) << r.err;
  EXPECT_LT(r.elapsed, 3000ms);

  r = sqllock(run_args("job", {"--wait", "400ms"}, "touch " + path("second-ran")));
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_NE(r.err.find("alice-holder"), std::string::npos) << r.err;
  EXPECT_GE(r.elapsed, 400ms);
  EXPECT_FALSE(file_exists(path("second-ran")));

  ::kill(holder->pid(), SIGTERM);
  EXPECT_EQ(holder->wait().exit_code, 128 + SIGTERM);
}

TEST_F(cli, second_run_waits_then_gets_a_larger_fence) {
  auto first = start(run_args(
      "job", {"--holder", "first"},
      "echo $SQLLOCK_FENCE > " + path("first.tmp") + "; mv " + path("first.tmp") + " " + path("first") + "; sleep 1"));
  ASSERT_TRUE(wait_for_file(path("first")));
  const auto started = std::chrono::steady_clock::now();
  const auto r =
      sqllock(run_args("job", {"--holder", "second", "--wait", "20s"}, "echo $SQLLOCK_FENCE > " + path("second")));
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(first->wait().exit_code, 0);
  EXPECT_GE(waited, 500ms) << "the second run must have waited for the first";
  EXPECT_GT(std::stoll(trimmed_file("second")), std::stoll(trimmed_file("first")));
}

TEST_F(cli, concurrent_runs_exclude_each_other) {
  // Each critical section creates a marker directory that must not exist (mkdir is atomic),
  // records its fence, sleeps and removes the marker. Any overlap is written to `overlap`.
  const std::string script = "if ! mkdir " + path("inside") + " 2>/dev/null; then echo $SQLLOCK_HOLDER >> " +
                             path("overlap") + "; fi; echo $SQLLOCK_FENCE >> " + path("fences") +
                             "; sleep 0.1; rmdir " + path("inside");
  constexpr int processes = 6;
  constexpr int rounds = 2;
  std::vector<std::unique_ptr<background_process>> procs;
  for (int i = 0; i < processes; ++i) {
    const std::string loop = "for i in $(seq " + std::to_string(rounds) + "); do " + cli_path() + " run --url " + url_ +
                             " --name shared --wait 60s --ttl 5s -- /bin/sh -c '" + script + "' || exit 1; done";
    procs.push_back(
        std::make_unique<background_process>(std::vector<std::string>{"/bin/sh", "-c", loop}, process_options{}));
  }
  for (auto& p : procs) {
    const auto r = p->wait(60s);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  EXPECT_FALSE(file_exists(path("overlap"))) << "critical sections overlapped: " << read_file(path("overlap"));
  std::istringstream fences(read_file(path("fences")));
  std::vector<long long> seen;
  for (long long f; fences >> f;) seen.push_back(f);
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(processes * rounds));
  for (std::size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GT(seen[i], seen[i - 1]) << "fences must strictly increase in critical-section order";
  }
  EXPECT_EQ(status_json().items.size(), 0u);
}

// ---------------------------------------------------------------------------------------------
// run: signals and loss.

TEST_F(cli, sigterm_is_forwarded_and_the_lock_released_after) {
  auto p = start(run_args("job", {"--holder", "graceful"},
                          "trap 'echo got-term > " + path("term") + "; exit 3' TERM; echo x > " + path("started") +
                              "; while :; do sleep 0.05; done"));
  ASSERT_TRUE(wait_for_file(path("started")));
  ASSERT_EQ(status_json().items.size(), 1u);
  ::kill(p->pid(), SIGTERM);
  const auto r = p->wait();
  EXPECT_EQ(r.exit_code, 3) << "sqllock exits with CMD's own code: " << r.err;
  EXPECT_EQ(trimmed_file("term"), "got-term");
  EXPECT_EQ(status_json().items.size(), 0u) << "released after CMD exited";
}

TEST_F(cli, sigint_is_forwarded) {
  auto p = start(run_args("job", {}, "echo x > " + path("started") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("started")));
  ::kill(p->pid(), SIGINT);
  const auto r = p->wait(5s);
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << r.err;
  EXPECT_EQ(status_json().items.size(), 0u);
}

TEST_F(cli, signal_while_waiting_gives_up_without_running) {
  auto holder = start(run_args("job", {"--ttl", "20s"}, "echo x > " + path("held") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("held")));
  auto waiter = start(run_args("job", {"--wait", "60s"}, "touch " + path("waiter-ran")));
  std::this_thread::sleep_for(300ms);
  ::kill(waiter->pid(), SIGTERM);
  const auto r = waiter->wait(5s);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_FALSE(file_exists(path("waiter-ran")));
  ::kill(holder->pid(), SIGTERM);
  holder->wait();
}

TEST_F(cli, lost_lease_kills_command_and_exits_76) {
  auto p = start(run_args("job", {"--holder", "victim", "--ttl", "2s", "--grace", "500ms"},
                          "echo $$ > " + path("pid") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("pid")));
  const pid_t cmd_pid = std::stoi(trimmed_file("pid"));

  const auto released = sqllock({"release", "--url", url_, "--name", "job", "--force"});
  EXPECT_EQ(released.exit_code, 0) << released.err;
  EXPECT_NE(released.out.find("victim"), std::string::npos) << released.out;

  const auto r = p->wait(6s);
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_NE(r.err.find("lost"), std::string::npos) << r.err;
  EXPECT_LT(r.elapsed, 5s);
  EXPECT_EQ(::kill(cmd_pid, 0), -1) << "CMD must be gone";
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(cli, lost_lease_sigkills_a_command_ignoring_sigterm) {
  auto p = start(run_args("job", {"--ttl", "1s", "--grace", "300ms"},
                          "trap '' TERM; echo $$ > " + path("pid") + "; while :; do sleep 0.05; done"));
  ASSERT_TRUE(wait_for_file(path("pid")));
  const pid_t cmd_pid = std::stoi(trimmed_file("pid"));
  EXPECT_EQ(sqllock({"release", "--url", url_, "--name", "job", "--force"}).exit_code, 0);
  const auto r = p->wait(6s);
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_EQ(::kill(cmd_pid, 0), -1) << "CMD ignoring SIGTERM must have been SIGKILLed";
}

TEST_F(cli, lost_lease_terminates_a_stopped_command_without_waiting_for_sigkill) {
  // SIGTERM alone stays pending on a stopped process; sqllock continues it so it can act.
  auto p = start(run_args("job", {"--ttl", "2s", "--grace", "20s"},
                          "echo $$ > " + path("pid") + "; kill -STOP $$; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("pid")));
  EXPECT_EQ(sqllock({"release", "--url", url_, "--name", "job", "--force"}).exit_code, 0);
  const auto r = p->wait(10s);
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_LT(r.elapsed, 8s) << "terminated by SIGTERM, not by SIGKILL after the 20s grace";
}

TEST_F(cli, command_is_terminated_when_sqllock_dies) {
  // Nobody renews the lease once sqllock is gone, so CMD must not go on (PR_SET_PDEATHSIG).
  auto p = start(run_args("job", {"--ttl", "30s"}, "echo $$ > " + path("pid") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("pid")));
  const pid_t cmd_pid = std::stoi(trimmed_file("pid"));
  ::kill(p->pid(), SIGKILL);
  EXPECT_EQ(p->wait().exit_code, 128 + SIGKILL);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = process_gone(cmd_pid);
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(gone) << "CMD " << cmd_pid << " survived sqllock";
}


// ---------------------------------------------------------------------------------------------
// Nothing CMD started outlives the lease (issue 10, items 8 and 5).

/// Poll until `pid` is gone or `deadline` passes; true when gone.
bool gone_by(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    if (process_gone(pid)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
}

/// Kills a test's stray process at scope exit, so a failing test leaves nothing running.
struct stray_killer {
  std::vector<pid_t> pids;
  ~stray_killer() {
    for (pid_t p : pids) {
      if (p > 0 && !process_gone(p)) ::kill(p, SIGKILL);
    }
  }
};

TEST_F(cli, grandchildren_stop_before_the_lease_expires_when_sqllock_is_killed) {
  // `sh -c 'job & wait'`: only sh was a direct child of sqllock; the job must stop as well, before
  // the lease can expire in the database (at most one TTL after the kill), and the lock then works.
  auto p = start(run_args("job", {"--ttl", "3s"}, "sleep 300 & echo $! > " + path("pid") + "; wait"));
  ASSERT_TRUE(wait_for_file(path("pid")));
  stray_killer strays{{std::stoi(trimmed_file("pid"))}};
  const auto killed_at = std::chrono::steady_clock::now();
  ::kill(p->pid(), SIGKILL);
  EXPECT_EQ(p->wait().exit_code, 128 + SIGKILL);
  EXPECT_TRUE(gone_by(strays.pids[0], killed_at + 3s)) << "grandchild " << strays.pids[0] << " outlived the lease";
  const auto r = sqllock(run_args("job", {"--wait", "10s"}, "echo ran > " + path("second")));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(trimmed_file("second"), "ran");
}

TEST_F(cli, a_grandchild_that_left_the_process_group_and_ignores_sigterm_stops_too) {
  // setsid takes it out of CMD's process group (and session), so a group signal cannot reach it;
  // it ignores SIGTERM, so only SIGKILL stops it, still within the TTL.
  auto p = start(run_args("job", {"--ttl", "3s", "--grace", "30s"},
                          "setsid /bin/sh -c 'trap \"\" TERM; echo $$ > " + path("pid") + "; exec sleep 300' & wait"));
  ASSERT_TRUE(wait_for_file(path("pid")));
  stray_killer strays{{std::stoi(trimmed_file("pid"))}};
  const auto killed_at = std::chrono::steady_clock::now();
  ::kill(p->pid(), SIGKILL);
  EXPECT_EQ(p->wait().exit_code, 128 + SIGKILL);
  EXPECT_TRUE(gone_by(strays.pids[0], killed_at + 3s)) << "setsid grandchild " << strays.pids[0] << " outlived the lease";
  const auto r = sqllock(run_args("job", {"--wait", "10s"}, "echo ran > " + path("second")));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(cli, command_is_stopped_in_time_while_run_itself_is_stopped) {
  // `run` frozen (SIGSTOP; the same as run blocked writing to a stalled stderr) renews nothing and
  // asks for nothing: the supervisor must stop CMD and its child by itself before the lease can
  // expire, at most one TTL after the freeze.
  auto p = start(run_args("job", {"--ttl", "3s", "--grace", "30s"},
                          "trap '' TERM; echo $$ > " + path("pid") + "; sleep 300 & echo $! > " + path("pid2") +
                              "; while :; do wait; done"));
  ASSERT_TRUE(wait_for_file(path("pid")));
  ASSERT_TRUE(wait_for_file(path("pid2")));
  stray_killer strays{{std::stoi(trimmed_file("pid")), std::stoi(trimmed_file("pid2"))}};
  const auto stopped_at = std::chrono::steady_clock::now();
  ::kill(p->pid(), SIGSTOP);
  EXPECT_TRUE(gone_by(strays.pids[0], stopped_at + 3s)) << "CMD ran past the lease's expiry while run was stopped";
  EXPECT_TRUE(gone_by(strays.pids[1], stopped_at + 3s)) << "CMD's child ran past the lease's expiry";
  ::kill(p->pid(), SIGCONT);
  EXPECT_EQ(p->wait().exit_code, 76);
}

TEST_F(cli, a_killed_supervisor_leaves_the_lock_to_expire_instead_of_releasing_it) {
  // With the supervisor gone, nothing can reach what CMD started outside its group: run must not
  // hand the lock to the next holder at once (it expires at its TTL, as a dead holder's would).
  auto p = start(run_args("job", {"--ttl", "3s"},
                          "echo $$ > " + path("pid") + "; sleep 300 & echo $! > " + path("pid2") + "; wait"));
  ASSERT_TRUE(wait_for_file(path("pid")));
  ASSERT_TRUE(wait_for_file(path("pid2")));
  const int cmd = std::stoi(trimmed_file("pid"));
  stray_killer strays{{cmd, std::stoi(trimmed_file("pid2"))}};
  std::ifstream stat("/proc/" + std::to_string(cmd) + "/stat");
  std::string line;
  std::getline(stat, line);
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  char state = 0;
  int supervisor = 0;
  fields >> state >> supervisor;
  ASSERT_GT(supervisor, 1);
  ASSERT_NE(supervisor, p->pid()) << "CMD's parent should be the supervisor, not run";
  ::kill(supervisor, SIGKILL);
  EXPECT_EQ(p->wait().exit_code, 70);
  EXPECT_EQ(status_json().items.size(), 1u) << "the lock was released while CMD's processes may still run";
  const auto r = sqllock(run_args("job", {"--wait", "10s"}, "echo ran > " + path("second")));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(trimmed_file("second"), "ran");
}

TEST_F(cli, processes_left_behind_by_the_command_stop_before_the_release) {
  // CMD exits at once and leaves a background job (in its group, and one out of it): the lock is
  // released only after both are gone, and CMD's exit code is kept.
  const auto r = sqllock(run_args("job", {"--grace", "300ms"},
                                  "sleep 300 & echo $! > " + path("pid1") + "; setsid /bin/sh -c 'trap \"\" TERM; echo $$ > " +
                                      path("pid2") + "; exec sleep 300' & while [ ! -s " + path("pid2") +
                                      " ]; do sleep 0.01; done; exit 3"));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  stray_killer strays{{std::stoi(trimmed_file("pid1")), std::stoi(trimmed_file("pid2"))}};
  EXPECT_TRUE(process_gone(strays.pids[0])) << "background job outlived the release";
  EXPECT_TRUE(process_gone(strays.pids[1])) << "setsid background job outlived the release";
  EXPECT_EQ(status_json().items.size(), 0u);
}

TEST_F(cli, command_is_stopped_before_the_lease_can_expire_when_renewals_fail) {
  // Another connection holds the SQLite database's write lock, so no renewal can succeed. The
  // lease expires in the database at most one TTL after that lock was taken; CMD (ignoring
  // SIGTERM, with a grace far longer than the TTL) and its child must be gone before then.
  auto p = start(run_args("job", {"--ttl", "3s", "--grace", "30s"},
                          "trap '' TERM; echo $$ > " + path("pid") + "; sleep 300 & echo $! > " + path("pid2") +
                              "; while :; do wait; done"));
  ASSERT_TRUE(wait_for_file(path("pid")));
  ASSERT_TRUE(wait_for_file(path("pid2")));
  stray_killer strays{{std::stoi(trimmed_file("pid")), std::stoi(trimmed_file("pid2"))}};
  write_file("lock.sql", ".timeout 10000\nBEGIN EXCLUSIVE;\n.shell echo x > " + path("locked") +
                             "\n.shell sleep 5\nCOMMIT;\n");
  process_options locker_options;
  locker_options.stdin_path = path("lock.sql");
  background_process locker({"sqlite3", dir_ + "/locks.db"}, locker_options);
  ASSERT_TRUE(wait_for_file(path("locked"), 10s));
  // No renewal that started after this point can succeed while the write lock is held.
  const auto expiry_bound = std::chrono::steady_clock::now() + 3s;
  EXPECT_TRUE(gone_by(strays.pids[0], expiry_bound)) << "CMD ran past the lease's expiry";
  EXPECT_TRUE(gone_by(strays.pids[1], expiry_bound)) << "CMD's child ran past the lease's expiry";
  const auto margin = std::chrono::duration_cast<std::chrono::milliseconds>(expiry_bound - std::chrono::steady_clock::now());
  std::cout << "[ margin   ] CMD and its child were gone " << margin.count() << " ms before the earliest possible expiry\n";
  const auto r = p->wait(10s);
  EXPECT_EQ(r.exit_code, 76) << r.err;
  locker.wait(10s);
}
TEST_F(cli, lease_is_renewed_past_its_ttl) {
  const auto r = sqllock(run_args("job", {"--ttl", "300ms"}, "sleep 1.2"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(cli, verbose_run_tells_the_story_of_the_lease) {
  auto holder = start(run_args("job", {"--holder", "first"}, "echo x > " + path("held") + "; sleep 0.5"));
  ASSERT_TRUE(wait_for_file(path("held")));
  const auto r = sqllock(run_args("job", {"-v", "--holder", "second", "--ttl", "300ms", "--wait", "20s"}, "sleep 0.5"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(holder->wait().exit_code, 0);
  for (const char* line : {"sqllock: debug: waiting for 'job': held by first", "sqllock: debug: acquired 'job' (token",
                           "sqllock: debug: renewed 'job' (token", "sqllock: debug: released 'job' (token"}) {
    EXPECT_NE(r.err.find(line), std::string::npos) << "missing '" << line << "' in:\n" << r.err;
  }
  const auto quiet = sqllock(run_args("job", {"--ttl", "300ms"}, "sleep 0.2"));
  EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("debug"), std::string::npos) << quiet.err;
}

TEST_F(cli, command_inherits_no_descriptor_of_the_library) {
  // The caller's descriptors pass through; the database file, its journal and the lock sidecar
  // files that the library opened must not (a leaked lock descriptor would outlive sqllock).
  const auto r = sqllock({"run", "--url", url_, "--name", "job", "--", "ls", "-l", "/proc/self/fd"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find(dir_), std::string::npos) << r.out;
  // Only stdout and stderr point at the helper's output files.
  std::size_t helper_files = 0;
  for (auto at = r.out.find("sqllock-cli-test"); at != std::string::npos; at = r.out.find("sqllock-cli-test", at + 1)) {
    ++helper_files;
  }
  EXPECT_EQ(helper_files, 2u) << r.out;
}

TEST_F(cli, sighup_is_forwarded_unless_ignored_at_start) {
  // Not ignored: sqllock passes SIGHUP on to CMD.
  auto r = sqllock(run_args("job", {}, "kill -HUP $PPID; sleep 2; echo survived > " + path("plain")));
  EXPECT_EQ(r.exit_code, 128 + SIGHUP) << r.err;
  EXPECT_FALSE(file_exists(path("plain")));
  // Ignored when sqllock starts (nohup): it stays ignored for sqllock and CMD alike.
  const std::string inner = cli_path() + " run --url " + url_ +
                            " --name job -- /bin/sh -c 'kill -HUP $PPID; kill -HUP $$; sleep 0.2; echo survived > " +
                            path("nohup") + "'";
  r = run_process({"/bin/sh", "-c", "trap '' HUP; exec " + inner});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(trimmed_file("nohup"), "survived");
}

TEST_F(cli, interactive_command_gets_the_terminal) {
  // `script` (util-linux, Essential in Debian) runs sqllock on a pseudo-terminal in its
  // foreground: CMD must be able to read the terminal (it runs in its own process group).
  write_file("input", "hello\n");
  write_file("cmd.sh", "read x; echo \"got $x\" > " + path("read") + "; exit 4\n");
  const std::string inner = cli_path() + " run --url " + url_ + " --name tty -- /bin/sh " + path("cmd.sh");
  process_options options;
  options.stdin_path = path("input");
  const auto r = run_process({"script", "-qec", inner, "/dev/null"}, options);
  EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
  EXPECT_EQ(trimmed_file("read"), "got hello");
}

TEST_F(cli, ctrl_c_on_the_terminal_reaches_the_command_once) {
  write_file("cmd.sh", "trap 'echo int >> " + path("ints") + "; exit 5' INT\necho x > " + path("started") +
                           "\nwhile :; do sleep 0.05; done\n");
  const std::string inner =
      cli_path() + " run --url " + url_ + " --name tty -- /bin/sh " + path("cmd.sh") + "; echo $? > " + path("rc");
  // Type Ctrl-C on the terminal once CMD runs; keep the terminal open a little longer.
  write_file("outer.sh",
             "(n=0; while [ ! -s " + path("started") +
                 " ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done; printf '\\003'; sleep 1) | script -qec '" +
                 inner + "' /dev/null\n");
  const auto r = run_process({"/bin/sh", path("outer.sh")});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(trimmed_file("ints"), "int") << "exactly one SIGINT, delivered by the terminal";
  EXPECT_EQ(trimmed_file("rc"), "5");
  EXPECT_EQ(status_json().items.size(), 0u);
}

TEST_F(cli, messages_while_the_command_has_the_terminal_do_not_stop_sqllock) {
  // With `stty tostop`, a background job writing to the terminal gets SIGTTOU. sqllock is in the
  // background while CMD has the terminal, and must still report a lost lease and exit 76. An
  // interactive bash makes sqllock a job of its own (a process group that is not orphaned, where
  // the kernel would really send SIGTTOU).
  const std::string run = cli_path() + " run --url " + url_ +
                          " --name tty --ttl 2s --grace 200ms -- /bin/sh -c \"echo x > " + path("started") +
                          "; exec sleep 30\"";
  write_file("feed.sh",
             "sleep 0.3\n"
             "printf '%s\\n' 'stty tostop; " +
                 run + "; echo $? > " + path("rc") +
                 "'\n"
                 "n=0; while [ ! -s " +
                 path("rc") +
                 " ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done\n"
                 "printf 'exit\\n'; sleep 0.2\n");
  auto p = std::make_unique<background_process>(
      std::vector<std::string>{"/bin/sh", "-c",
                               "/bin/sh " + path("feed.sh") + " | script -qec 'bash --norc --noprofile -i' /dev/null"},
      process_options{});
  if (!wait_for_file(path("started"))) {
    write_file("rc", "x");  // ends the feed
    const auto failed = p->wait(5s);
    FAIL() << "CMD did not start: " << failed.out << failed.err;
  }
  EXPECT_EQ(sqllock({"release", "--url", url_, "--name", "tty", "--force"}).exit_code, 0);
  ASSERT_TRUE(wait_for_file(path("rc")));
  EXPECT_EQ(trimmed_file("rc"), "76");
  const auto r = p->wait(10s);
  EXPECT_NE(r.out.find("sending SIGTERM"), std::string::npos) << "written while in the background: " << r.out;
}

TEST_F(cli, ctrl_z_suspends_the_job_and_fg_resumes_it) {
  // An interactive bash on a pseudo-terminal: Ctrl-Z stops CMD and sqllock together (bash sees
  // the job stopped, the lock stays held), `fg` resumes both, Ctrl-C then ends CMD. Each step
  // waits for its observable state (terminal_session.hpp); CMD is a bash script, not dash.
  write_file("cmd.sh", "trap 'echo int >> " + path("ints") + "; exit 5' INT\necho $$ > " + path("pid") +
                           "\nwhile :; do sleep 0.05; done\n");
  terminal_session term;
  ASSERT_TRUE(term.started());
  ASSERT_TRUE(term.wait_for("$ "));
  term.type(in_foreground(" run --url " + url_ + " --name tty -- bash " + path("cmd.sh")));
  ASSERT_TRUE(wait_for_file(path("pid"))) << term.screen();
  const pid_t cmd = std::stoi(trimmed_file("pid"));  // CMD leads its own process group
  ASSERT_TRUE(wait_until([&] { return terminal_foreground_of(cmd) == cmd; })) << "CMD has the terminal";
  term.type("\x1a");
  ASSERT_TRUE(term.wait_for("Stopped")) << term.screen();
  ASSERT_TRUE(wait_until([&] { return process_group_stopped(cmd); })) << process_group_states(cmd);
  EXPECT_EQ(status_json().items.size(), 1u) << "the lock stays held while the job is stopped";
  term.type("fg\n");
  ASSERT_TRUE(wait_until([&] { return !process_group_stopped(cmd) && terminal_foreground_of(cmd) == cmd; }))
      << "fg continues CMD and gives it the terminal: " << process_group_states(cmd) << term.screen();
  term.type("\x03");
  ASSERT_TRUE(wait_for_file(path("ints"))) << term.screen();
  term.type("echo rc=$?.\n");
  EXPECT_TRUE(term.wait_for("rc=5.")) << "fg returns sqllock's exit code, CMD's own: " << term.screen();
  EXPECT_EQ(trimmed_file("ints"), "int");
  EXPECT_EQ(status_json().items.size(), 0u);
}

// ---------------------------------------------------------------------------------------------
// status and release.

TEST_F(cli, status_empty_prints_header_or_empty_array) {
  auto r = sqllock({"status", "--url", url_});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("NAME"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("HOLDER"), std::string::npos) << r.out;
  r = sqllock({"status", "--url", url_, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[]\n");
}

TEST_F(cli, status_json_escapes_names_and_release_force_empties_it) {
  const std::string name = "we\"ird\\name\n\t\x01 d\xc3\xa9j\xc3\xa0 \xe2\x88\x86";
  auto p = start(run_args(name, {"--holder", "json \"holder\"", "--ttl", "2s", "--grace", "200ms"},
                          "echo x > " + path("held") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("held")));

  const auto locks = status_json();
  ASSERT_EQ(locks.type, json_value::kind::array);
  ASSERT_EQ(locks.items.size(), 1u);
  const auto& lock = locks.items[0];
  EXPECT_EQ(lock.at("name").text, name);
  EXPECT_EQ(lock.at("holder").text, "json \"holder\"");
  EXPECT_GE(lock.at("fencing_token").number, 1);
  EXPECT_EQ(lock.at("hold_count").number, 1);
  EXPECT_GT(lock.at("time_left_ms").number, 0);
  EXPECT_LE(lock.at("time_left_ms").number, 2000);

  // The table shows the escaped name and the holder.
  const auto table = sqllock({"status", "--url", url_});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("we\"ird\\\\name\\x0A"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("json \"holder\""), std::string::npos) << table.out;

  const auto released = sqllock({"release", "--url", url_, "--name", name, "--force"});
  EXPECT_EQ(released.exit_code, 0) << released.err;
  EXPECT_EQ(status_json().items.size(), 0u);
  EXPECT_EQ(p->wait(6s).exit_code, 76);

  const auto again = sqllock({"release", "--url", url_, "--name", name, "--force"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("not held"), std::string::npos) << again.out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Issue 15: the command as natural as flock(1).

namespace {

/// Display columns of UTF-8 `text` for the test's own strings: ASCII 1, CJK (U+2E80..U+9FFF,
/// U+AC00..U+D7A3, U+FF01..U+FF60) 2, combining marks (U+0300..U+036F) 0, anything else 1.
std::size_t test_width(std::string_view text) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    std::size_t len = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : 4;
    unsigned cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (std::size_t k = 1; k < len && i + k < text.size(); ++k) cp = (cp << 6) | (text[i + k] & 0x3F);
    if (cp >= 0x300 && cp <= 0x36F) {
    } else if ((cp >= 0x2E80 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xFF01 && cp <= 0xFF60)) {
      width += 2;
    } else {
      width += 1;
    }
    i += len;
  }
  return width;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

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

// Like `flock FILE CMD ARGS`, every argument after CMD is CMD's, flags included.
TEST_F(cli, run_takes_every_argument_after_the_command_without_a_double_dash) {
  const std::string out = path("args");
  auto r = sqllock({"run", "--url", url_, "--name", "job", "/bin/sh", "-c", "printf '%s|' \"$@\" > " + out, "sh", "-la",
                    "--name", "other", "--ttl", "0s", "--", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(out), "-la|--name|other|--ttl|0s|--|--help|");

  // The brief's own example: `ls -la` runs as `ls -la`.
  r = sqllock({"run", "--url", url_, "--name", "job", "ls", "-la", dir_});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("locks.db"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(".."), std::string::npos) << "-a was not passed to ls: " << r.out;

  // `--` still works, and the flags before CMD are still sqllock's.
  r = sqllock({"run", "--url", url_, "--name", "job", "--ttl", "5s", "--", "/bin/sh", "-c",
               "printf '%s|' \"$@\" > " + out, "sh", "--", "-x"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(out), "--|-x|");
  r = sqllock({"run", "--url", url_, "--name", "job", "--ttl", "5x", "true"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
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

// Acquired-at and expires-at (database clock) in the table and the JSON; wide characters
// keep the columns lined up.
TEST_F(cli, status_shows_acquired_and_expires_and_aligns_wide_characters) {
  const std::string wide = "\xe9\x8c\xa0\xe5\x89\x8d\xe3\x83\xad\xe3\x83\x83\xe3\x82\xaf";  // 錠前ロック: 10 columns
  const std::string combining = "cafe\xcc\x81-job";                                        // café-job: 8 columns
  auto a = start(run_args(wide, {"--holder", "h-wide", "--ttl", "20s"}, "echo x > " + path("a") + "; exec sleep 30"));
  auto b = start(run_args("ascii-name", {"--holder", "h-ascii", "--ttl", "20s"}, "echo x > " + path("b") + "; exec sleep 30"));
  auto c = start(run_args(combining, {"--holder", "h-comb", "--ttl", "20s"}, "echo x > " + path("c") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("a")));
  ASSERT_TRUE(wait_for_file(path("b")));
  ASSERT_TRUE(wait_for_file(path("c")));

  const auto locks = status_json();
  ASSERT_EQ(locks.items.size(), 3u);
  for (const auto& lock : locks.items) {
    const std::string acquired = lock.at("acquired_at").text;
    const std::string expires = lock.at("expires_at").text;
    // RFC 3339 UTC with milliseconds: 2026-11-25T12:34:56.789Z
    EXPECT_EQ(acquired.size(), 24u) << acquired;
    EXPECT_EQ(acquired.back(), 'Z') << acquired;
    EXPECT_EQ(acquired[10], 'T') << acquired;
    EXPECT_LT(acquired, expires);
    EXPECT_FALSE(lock.at("owner").text.empty());
    // The acquisition was within the last minute by this machine's clock (SQLite: the same clock).
    std::tm tm{};
    ASSERT_NE(::strptime(acquired.c_str(), "%Y-%m-%dT%H:%M:%S", &tm), nullptr) << acquired;
    const auto t = ::timegm(&tm);
    EXPECT_LE(std::abs(static_cast<long long>(::time(nullptr) - t)), 60) << acquired;
  }

  const auto r = sqllock({"status", "--url", url_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  EXPECT_NE(lines[0].find("ACQUIRED"), std::string::npos) << r.out;
  EXPECT_NE(lines[0].find("EXPIRES"), std::string::npos) << r.out;
  // Every column starts at the same display column on every line.
  const auto column_of = [](const std::string& line, const std::string& text) {
    const auto at = line.find(text);
    return at == std::string::npos ? std::string::npos : test_width(std::string_view(line).substr(0, at));
  };
  const std::size_t holder_col = column_of(lines[0], "HOLDER");
  const std::size_t fence_end = column_of(lines[0], "FENCE") + 5;
  const std::size_t acquired_col = column_of(lines[0], "ACQUIRED");
  const std::size_t left_col = column_of(lines[0], "TIME LEFT");
  ASSERT_NE(holder_col, std::string::npos);
  ASSERT_NE(acquired_col, std::string::npos);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const auto width_to = [&](std::size_t byte) { return test_width(std::string_view(line).substr(0, byte)); };
    const auto holder_at = line.find(" h-") + 1;
    EXPECT_EQ(width_to(holder_at), holder_col) << r.out;
    // The right-aligned fence ends under the end of FENCE; ACQUIRED and TIME LEFT start under theirs.
    const auto fence_at = line.find_first_not_of(' ', line.find(' ', holder_at));
    const auto fence_stop = line.find(' ', fence_at);
    EXPECT_EQ(width_to(fence_stop), fence_end) << r.out;
    EXPECT_EQ(width_to(line.find_first_not_of(' ', fence_stop)), acquired_col) << r.out;
    EXPECT_EQ(width_to(line.find_last_of(' ') + 1), left_col) << r.out;
  }
  for (auto* p : {a.get(), b.get(), c.get()}) ::kill(p->pid(), SIGTERM);
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
  auto r = sqllock({"status", "--url", maria});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = sqllock({"status", "--url", maria + "?ssl-mode=disabled"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = sqllock({"status", "--url", maria + "?ssl-mode=sometimes"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("ssl-mode"), std::string::npos) << r.err;
  // The test server has no TLS: ssl-mode=required is refused as unreachable (exit 69), naming the
  // URL as written.
  r = sqllock({"status", "--url", maria + "?ssl-mode=required"});
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_NE(r.err.find("TLS"), std::string::npos) << r.err;
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
