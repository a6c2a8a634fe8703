// The story tests' fixture: backend selection, temp dirs, spawning the sqllock command.
#include "story_fixture.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>

#include <sstream>
#include <thread>
#include "sqllock/migrations.hpp"

namespace stories {
namespace {
backend_under_test g_backend;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

const backend_under_test& backend() { return g_backend; }

int run_stories(int argc, char** argv, backend_under_test b) {
  g_backend = std::move(b);
  if (g_backend.url.empty()) {
    std::cerr << "stories_" << g_backend.name << ": no database URL for this backend (set SQLLOCK_TEST_"
              << (g_backend.name == "mysql" ? "MYSQL" : "POSTGRESQL")
              << "_URL, e.g. by sourcing the env.sh of scripts/*-server.sh); this is a failure, not a skip\n";
    return 2;
  }
  if (const char* role = std::getenv("SQLLOCK_STORIES_ROLE")) {
    if (const char* url = std::getenv("SQLLOCK_STORIES_URL")) g_backend.url = url;
    try {
      if (std::string(role) == "migrate_pause" && argc == 6) {
        sqllock::migrate_options o;
        o.history_table = argv[2];
        o.lock_ttl = std::chrono::milliseconds(std::stoll(argv[3]));
        const auto pause = std::chrono::milliseconds(std::stoll(argv[4]));
        const std::string marker = argv[5];
        o.before_commit = [pause, marker](std::int64_t version) {
          if (version != 2) return;
          std::ofstream(marker) << "inside migration 2\n";
          std::this_thread::sleep_for(pause);
        };
        auto c = make_client();
        sqllock::migrate_directory(c, argv[1], o);
        return 0;
      }
    } catch (const std::exception& e) {
      std::cerr << "child " << role << ": " << e.what() << "\n";
      return 5;
    }
    std::cerr << "unknown child role " << role << "\n";
    return 6;
  }
  if (int rc = sqllock_testing::prepare_database(g_backend.url, "stories_" + g_backend.name)) return rc;
  ::testing::InitGoogleTest(&argc, argv);
  // A suite named *PostgreSqlOnly tests what only PostgreSQL does: it is left out of the other
  // backends' programs, not skipped in them (a skip would count as passed).
  // Likewise *ServersOnly: what SQLite's single writer makes impossible to set up.
  const auto leave_out = [](const char* suite) {
    std::string filter = GTEST_FLAG_GET(filter);
    filter += (filter.find('-') == std::string::npos ? "-*" : ":*") + std::string(suite) + ".*";
    GTEST_FLAG_SET(filter, filter);
  };
  if (g_backend.name != "postgresql") leave_out("PostgreSqlOnly");
  if (g_backend.name == "sqlite") leave_out("ServersOnly");
  return RUN_ALL_TESTS();
}

sqllock::client make_client(sqllock::client_options options) { return sqllock::connect(g_backend.url, options); }

sqllock::dialect current_dialect() {
  if (g_backend.name == "postgresql") return sqllock::dialect::postgresql;
  if (g_backend.name == "mysql") return sqllock::dialect::mysql;
  return sqllock::dialect::sqlite;
}

void exec(sqllock::client& c, const std::string& sql, const std::vector<sqllock::value>& params) {
  auto tx = c.begin();
  tx.execute(sql, params);
  tx.commit();
}

sqllock::result_rows query(sqllock::client& c, const std::string& sql, const std::vector<sqllock::value>& params) {
  auto tx = c.begin();
  auto rows = tx.query(sql, params);
  tx.commit();
  return rows;
}

bool table_exists(sqllock::client& c, const std::string& table) {
  switch (current_dialect()) {
    case sqllock::dialect::postgresql:
      return query(c, "SELECT CASE WHEN to_regclass(?) IS NULL THEN 0 ELSE 1 END", {table}).at(0).as_int(0) == 1;
    case sqllock::dialect::mysql:
      return query(c,
                   "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
                   {table})
                 .at(0)
                 .as_int(0) == 1;
    case sqllock::dialect::sqlite:
      break;
  }
  return query(c, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?", {table}).at(0).as_int(0) == 1;
}

temp_dir::temp_dir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "sqllock-stories-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

temp_dir::~temp_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void temp_dir::write(const std::string& file, const std::string& text) const {
  std::ofstream out(path_ / file, std::ios::binary | std::ios::trunc);
  out << text;
}

cli_process::cli_process(const std::vector<std::string>& args) {
  // SQLLOCK_STORIES_CLI overrides the built command (e.g. to test an installed one).
  const char* override_path = std::getenv("SQLLOCK_STORIES_CLI");
  std::vector<std::string> argv{override_path && *override_path ? override_path : SQLLOCK_CLI_PATH};
  if (argv[0].empty()) {
    ADD_FAILURE() << "built without the sqllock command (SQLLOCK_BUILD_CLI=OFF): set SQLLOCK_STORIES_CLI";
  }
  argv.insert(argv.end(), args.begin(), args.end());
  start(std::move(argv), "");
}

cli_process::cli_process(const std::string& role, const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/proc/self/exe"};
  argv.insert(argv.end(), args.begin(), args.end());
  start(std::move(argv), role);
}

void cli_process::start(std::vector<std::string> argv, const std::string& role) {
  static std::atomic<int> n{0};
  const std::string base = (std::filesystem::temp_directory_path() /
                            ("sqllock-stories-cli-" + std::to_string(getpid()) + "-" + std::to_string(n++)))
                               .string();
  out_ = base + ".out";
  err_ = base + ".err";
  pid_ = fork();
  if (pid_ == 0) {
    int o = open(out_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    int e = open(err_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    dup2(o, 1);
    dup2(e, 2);
    unsetenv("SQLLOCK_URL");
    if (!role.empty()) {
      setenv("SQLLOCK_STORIES_ROLE", role.c_str(), 1);
      setenv("SQLLOCK_STORIES_URL", g_backend.url.c_str(), 1);  // SQLite: the parent's file
    }
    std::vector<char*> raw;
    for (auto& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    execv(raw[0], raw.data());
    _exit(127);
  }
}

cli_process::~cli_process() {
  if (!reaped_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  unlink(out_.c_str());
  unlink(err_.c_str());
}

void cli_process::kill_hard() {
  if (!reaped_ && pid_ > 0) ::kill(pid_, SIGKILL);
}

process_result cli_process::wait(std::chrono::milliseconds timeout) {
  if (reaped_) return result_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "sqllock did not finish in time; killing it";
      ::kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  reaped_ = true;
  result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result_.out = slurp(out_);
  result_.err = slurp(err_);
  return result_;
}

process_result run_cli(std::vector<std::string> args) {
  args.push_back("--url");
  args.push_back(g_backend.url);
  cli_process p(args);
  return p.wait();
}

std::string slow_statement(int seconds) {
  switch (current_dialect()) {
    case sqllock::dialect::postgresql:
      return "SELECT pg_sleep(" + std::to_string(seconds) + ")";
    case sqllock::dialect::mysql:
      return "SELECT SLEEP(" + std::to_string(seconds) + ")";
    case sqllock::dialect::sqlite:
      break;
  }
  // About 10 million rows per second on this machine's class of CPU; the point is only "slow".
  return "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < " +
         std::to_string(seconds * 8000000) + ") SELECT count(*) FROM c";
}

}  // namespace stories
