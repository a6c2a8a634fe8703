// The conformance fixture: hooks, child-process roles, helpers shared by every test file.
#include "conformance/fixture.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>

namespace sqllock_test {
namespace {

backend_hooks g_hooks;

// ---- child roles: each is a whole process using its own client ----

// mutex_loop NAME ITERATIONS MARKER LOG: acquire, create MARKER exclusively (an overlap makes that
// fail), append the token to LOG, release; exit 3 on overlap, 4 on a token that did not grow.
int child_mutex_loop(const std::vector<std::string>& a) {
  auto c = make_client();
  int n = std::stoi(a[1]);
  std::int64_t last = 0;
  for (int i = 0; i < n; ++i) {
    auto g = c.acquire_for(a[0], std::chrono::seconds(60), {.ttl = std::chrono::seconds(10)});
    int fd = open(a[2].c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0) return 3;
    close(fd);
    if (g.fencing_token() <= last) return 4;
    last = g.fencing_token();
    {
      std::ofstream log(a[3], std::ios::app);
      log << g.fencing_token() << "\n";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    unlink(a[2].c_str());
    g.release();
  }
  return 0;
}

// hold NAME TTL_MS HOLD_MS READY_FILE: acquire, write READY_FILE, hold, release (HOLD_MS < 0: die
// without releasing, like a crash).
int child_hold(const std::vector<std::string>& a) {
  auto c = make_client();
  bool crash = std::stoi(a[2]) < 0;
  auto g = c.acquire_for(a[0], std::chrono::seconds(30),
                         {.ttl = std::chrono::milliseconds(std::stoi(a[1])), .auto_renew = !crash});
  {
    std::ofstream ready(a[3]);
    ready << g.fencing_token() << "\n";
  }
  if (crash) {
    kill(getpid(), SIGKILL);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(a[2])));
  g.release();
  return 0;
}

// fair_wait NAME TICKET_TTL_MS LABEL: wait for NAME in fair mode with that ticket TTL, labelled
// LABEL (the parent kills it while it waits); exit 7 if it ever gets the lock.
int child_fair_wait(const std::vector<std::string>& a) {
  sqllock::client_options o;
  o.holder_id = a[2];
  auto c = make_client(o);
  sqllock::lease_options l;
  l.ttl = std::chrono::seconds(10);
  l.fair = true;
  l.fair_ticket_ttl = std::chrono::milliseconds(std::stoi(a[1]));
  auto g = c.acquire_for(a[0], std::chrono::seconds(60), l);
  return 7;
}

}  // namespace

const backend_hooks& hooks() { return g_hooks; }

int run_suite(int argc, char** argv, backend_hooks h) {
  g_hooks = std::move(h);
  if (g_hooks.url.empty()) {
    std::cerr << "conformance_" << g_hooks.name << ": no database URL for this backend; the " << g_hooks.name
              << " server must be started by scripts/test-all.sh (this is a failure, not a skip)\n";
    return 2;
  }
  if (const char* role = std::getenv("SQLLOCK_TEST_CHILD_ROLE")) {
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
    try {
      if (std::string(role) == "mutex_loop") return child_mutex_loop(args);
      if (std::string(role) == "hold") return child_hold(args);
      if (std::string(role) == "fair_wait") return child_fair_wait(args);
    } catch (const std::exception& e) {
      std::cerr << "child " << role << ": " << e.what() << "\n";
      return 5;
    }
    std::cerr << "unknown child role " << role << "\n";
    return 6;
  }
  if (int rc = sqllock_testing::prepare_database(g_hooks.url, "conformance_" + g_hooks.name)) return rc;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

sqllock::client make_client(sqllock::client_options options) { return sqllock::connect(g_hooks.url, options); }

sqllock::client_options events_only_options() {
  sqllock::client_options o;
  o.poll_min = std::chrono::seconds(5);
  o.poll_max = std::chrono::seconds(5);
  return o;
}

std::string record_version_sql(sqllock::dialect d, const std::string& schema_table, int version) {
  const std::string v = std::to_string(version);
  switch (d) {
    case sqllock::dialect::postgresql:
      return "INSERT INTO " + schema_table + " (version) VALUES (" + v + ")";
    case sqllock::dialect::mysql:
      return "INSERT INTO " + schema_table + " (version, name, applied_at) VALUES (" + v + ", 'v" + v +
             "', UTC_TIMESTAMP(6))";
    default:
      return "INSERT INTO " + schema_table + " (version, name) VALUES (" + v + ", 'v" + v + "')";
  }
}

user_table::user_table(sqllock::client& c, const std::vector<std::pair<std::int64_t, std::int64_t>>& rows)
    : c_(c), name_(unique_name("t")) {
  auto tx = c_.begin();
  tx.execute("CREATE TABLE " + name_ + " (id BIGINT PRIMARY KEY, qty BIGINT NOT NULL, version BIGINT NOT NULL)");
  for (auto [id, qty] : rows) tx.execute("INSERT INTO " + name_ + " VALUES (?, ?, 1)", {id, qty});
  tx.commit();
}

user_table::~user_table() {
  try {
    auto tx = c_.begin();
    tx.execute("DROP TABLE " + name_);
    tx.commit();
  } catch (const std::exception& e) {
    std::cerr << "could not drop " << name_ << ": " << e.what() << "\n";
  }
}

std::int64_t user_table::qty(std::int64_t id) {
  auto tx = c_.begin();
  auto rows = tx.query("SELECT qty FROM " + name_ + " WHERE id = ?", {id});
  tx.commit();
  return rows.at(0).as_int(0);
}

std::int64_t user_table::version(std::int64_t id) {
  auto tx = c_.begin();
  auto rows = tx.query("SELECT version FROM " + name_ + " WHERE id = ?", {id});
  tx.commit();
  return rows.at(0).as_int(0);
}

int spawn_child(const std::string& role, const std::vector<std::string>& args) {
  std::vector<std::string> argv_s{"/proc/self/exe"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::string exe(4096, '\0');
  ssize_t n = readlink("/proc/self/exe", exe.data(), exe.size() - 1);
  if (n <= 0) return -1;
  exe.resize(static_cast<std::size_t>(n));
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::string env_role = "SQLLOCK_TEST_CHILD_ROLE=" + role;
  pid_t pid = fork();
  if (pid == 0) {
    putenv(env_role.data());
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

int wait_child(int pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace sqllock_test
