// End-to-end tests of `sqllock run --max-hold` / `--min-hold`, of the at-risk message, and of the
// fenced-write shell example (examples/fenced_job.sh), on SQLite (issue 13).
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
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

/// `pid` has exited and waits to be reaped by its parent.
bool is_zombie(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

bool gone(pid_t pid) {
  // A zombie (not yet reaped by its subreaper) counts as gone: it runs nothing.
  if (::kill(pid, 0) == 0) return is_zombie(pid);
  return errno == ESRCH;
}

/// Holds `pid` (the supervisor) under ptrace from its next getdents64 on: the first system call of
/// the /proc scan that sends a stop's SIGTERM, made after the supervisor last reaped. No hook in
/// the supervisor: the test stops it as a debugger would (the test is the supervisor's ancestor and
/// runs as its user; where ptrace is forbidden, e.g. Yama ptrace_scope 3, the test fails saying so).
/// Detaches (the process runs on) when destroyed.
class held_at_scan {
 public:
  explicit held_at_scan(pid_t pid) : pid_(pid) {
    if (::ptrace(PTRACE_SEIZE, pid_, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACESYSGOOD)) != 0) {
      why_ = std::string("ptrace(PTRACE_SEIZE) of the supervisor: ") + std::strerror(errno);
      return;
    }
    attached_ = true;
    ::ptrace(PTRACE_INTERRUPT, pid_, nullptr, nullptr);
    for (;;) {
      int status = 0;
      if (::waitpid(pid_, &status, __WALL) != pid_ || !WIFSTOPPED(status)) {
        why_ = "the supervisor ended while traced";
        attached_ = false;
        return;
      }
      const int stop = WSTOPSIG(status);
      int signo = 0;  // a signal to pass on: none for a system-call stop or our PTRACE_INTERRUPT
      if (stop == (SIGTRAP | 0x80)) {
        __ptrace_syscall_info info{};
        if (::ptrace(PTRACE_GET_SYSCALL_INFO, pid_, reinterpret_cast<void*>(sizeof info), &info) > 0 &&
            info.op == PTRACE_SYSCALL_INFO_ENTRY && info.entry.nr == SYS_getdents64) {
          return;  // held here until detached
        }
      } else if ((status >> 16) == 0) {
        signo = stop;  // a signal-delivery stop
      }
      ::ptrace(PTRACE_SYSCALL, pid_, nullptr, reinterpret_cast<void*>(static_cast<long>(signo)));
    }
  }
  ~held_at_scan() {
    if (attached_) ::ptrace(PTRACE_DETACH, pid_, nullptr, nullptr);
  }
  held_at_scan(const held_at_scan&) = delete;
  held_at_scan& operator=(const held_at_scan&) = delete;
  /// Empty when the supervisor is held at the scan.
  const std::string& why_not() const { return why_; }

 private:
  pid_t pid_;
  bool attached_ = false;
  std::string why_;
};

class cli_hold : public sqlite_fixture {
 protected:
  const char* dir_prefix() const override { return "hold"; }
  /// How many locks `status --json` lists.
  std::size_t held_count() {
    const auto r = sqllock({"status", "--url", url_, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::size_t n = 0;
    for (auto at = r.out.find("\"name\""); at != std::string::npos; at = r.out.find("\"name\"", at + 1)) ++n;
    return n;
  }
};

// ---------------------------------------------------------------------------------------------
// --max-hold

TEST_F(cli_hold, max_hold_stops_a_long_command_in_time_exits_76_and_frees_the_lock) {
  // A TTL far longer than --max-hold: the bound, not the lease, must stop CMD.
  auto p = start(run_args("job", {"--ttl", "30s", "--grace", "500ms", "--max-hold", "2s"},
                          "trap 'echo term > " + path("term") + "; exit 9' TERM; echo $$ > " + path("pid") +
                              "; while :; do sleep 0.05; done"));
  ASSERT_TRUE(wait_for_file(path("pid")));
  const auto started = std::chrono::steady_clock::now();
  const pid_t cmd = std::stoi(trimmed_file("pid"));
  const auto r = p->wait(10s);
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_NE(r.err.find("--max-hold 2"), std::string::npos) << r.err;
  EXPECT_EQ(trimmed_file("term"), "term") << "CMD gets SIGTERM first";
  EXPECT_GE(took, 1500ms);
  EXPECT_LT(took, 3500ms) << "stopped at --max-hold, not at the 30s TTL";
  EXPECT_TRUE(gone(cmd));
  EXPECT_EQ(held_count(), 0u) << "the lock is released once CMD is gone";
  const auto next = sqllock(run_args("job", {"--wait", "0s"}, "true"));
  EXPECT_EQ(next.exit_code, 0) << next.err;
}

TEST_F(cli_hold, max_hold_sigkills_a_command_ignoring_sigterm_after_the_grace) {
  auto p = start(run_args("job", {"--ttl", "20s", "--grace", "700ms", "--max-hold", "1s"}, stubborn_command()));
  const auto pids = stubborn_pids();
  ASSERT_EQ(pids.size(), 2u) << "CMD did not write its pid files";
  const auto started = std::chrono::steady_clock::now();
  const pid_t cmd = pids[0];
  const pid_t child = pids[1];
  const auto r = p->wait(10s);
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_LT(took, 1000ms + 700ms + 1000ms) << "SIGKILL --grace after --max-hold";
  EXPECT_TRUE(gone(cmd));
  EXPECT_TRUE(gone(child)) << "CMD's child too";
  if (!gone(child)) ::kill(child, SIGKILL);
  EXPECT_EQ(held_count(), 0u);
}

TEST_F(cli_hold, max_hold_longer_than_the_command_changes_nothing) {
  const auto r = sqllock(run_args("job", {"--ttl", "3s", "--max-hold", "1h"}, "sleep 0.2; exit 5"));
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_EQ(held_count(), 0u);
}

TEST_F(cli_hold, max_hold_reached_while_leftovers_of_an_ended_command_stop_keeps_its_exit_code) {
  // CMD exits 5 at once; what it left behind ignores SIGTERM and is killed after --grace, past
  // --max-hold. CMD itself was not stopped by --max-hold: run exits with CMD's code.
  const auto r = sqllock(run_args("job", {"--ttl", "20s", "--grace", "2s", "--max-hold", "500ms"},
                                  "sh -c \"trap '' TERM; touch " + path("ready") + "; exec sleep 60\" & while [ ! -f " +
                                      path("ready") + " ]; do sleep 0.02; done; exit 5"));
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_GE(r.elapsed, 1500ms) << "the leftover was killed --grace after CMD's exit, past --max-hold";
  EXPECT_EQ(held_count(), 0u);
}

TEST_F(cli_hold, a_command_that_exits_between_the_supervisor_s_reap_and_its_sigterm_keeps_its_exit_code) {
  // The supervisor reaps, then learns of the --max-hold stop and scans /proc to send SIGTERM; CMD
  // exits 3 by itself in between, so the scan finds it a zombie, not yet reaped. The supervisor's
  // check just before the kill (waitid WNOWAIT) must see that CMD had exited: the stop did not end
  // it, and run passes its 3 on, not 76. The test holds the supervisor (ptrace) at the start of
  // that scan, lets CMD exit, waits until it is a zombie, then lets the supervisor go on.
  const auto fifo = path("go");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  auto p = start(run_args("job", {"--ttl", "30s", "--grace", "2s", "--max-hold", "1s"},
                          "echo $$ $PPID > " + path("pids") + "; read x < " + fifo + "; exit 3"));
  ASSERT_TRUE(wait_for_file(path("pids")));
  std::istringstream pids(read_file(path("pids")));
  pid_t cmd = 0, supervisor = 0;
  pids >> cmd >> supervisor;
  ASSERT_GT(supervisor, 0);
  {
    held_at_scan held(supervisor);  // returns once run asked for the stop at --max-hold
    ASSERT_EQ(held.why_not(), "");
    const int w = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(w, 0) << std::strerror(errno);
    ASSERT_EQ(::write(w, "\n", 1), 1);
    ::close(w);
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (!is_zombie(cmd) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
    ASSERT_TRUE(is_zombie(cmd)) << "CMD did not exit";
  }
  const auto r = p->wait(10s);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("had ended by itself"), std::string::npos) << r.err;
  EXPECT_EQ(held_count(), 0u);
}

TEST_F(cli_hold, max_hold_passing_before_run_learns_of_a_command_s_own_exit_keeps_its_exit_code) {
  // The reverse race of --max-hold: CMD exits 3 by itself before --max-hold is reached, but run and
  // the supervisor learn of the exit only after it (a loaded machine delays their wake-ups). Here
  // the delay is made certain: just before it exits, CMD stops (SIGSTOP) its parent, the
  // supervisor, and run, the supervisor's parent; the test continues run well past --max-hold (run
  // then asks for the stop), and the supervisor after that. Nothing stopped CMD: its own code is
  // passed on, not 76.
  auto p = start(run_args("job", {"--ttl", "30s", "--grace", "500ms", "--max-hold", "1s"},
                          "sup=$PPID; run=$(cut -d' ' -f4 /proc/$sup/stat); kill -STOP $run $sup; echo $run $sup > " +
                              path("stopped") + "; exit 3"));
  ASSERT_TRUE(wait_for_file(path("stopped")));
  std::istringstream pids(read_file(path("stopped")));
  pid_t run = 0, supervisor = 0;
  pids >> run >> supervisor;
  struct continuer {  // never leave the supervisor stopped, whatever fails
    pid_t pid;
    ~continuer() {
      if (pid > 0) ::kill(pid, SIGCONT);
    }
  } continue_supervisor{supervisor};
  ASSERT_EQ(run, p->pid()) << "CMD stopped some other process";
  // --max-hold counts from the acquisition, which came before CMD started: past it by now.
  std::this_thread::sleep_for(1300ms);
  ::kill(run, SIGCONT);
  std::this_thread::sleep_for(100ms);
  ::kill(supervisor, SIGCONT);
  const auto r = p->wait(10s);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.err.find("the command was stopped"), std::string::npos) << r.err;
  EXPECT_EQ(held_count(), 0u);
  EXPECT_EQ(sqllock(run_args("job", {"--wait", "0s"}, "true")).exit_code, 0);
}

TEST_F(cli_hold, max_hold_with_a_ttl_shorter_than_it_keeps_renewing_until_then) {
  // TTL 1s, --max-hold 3s: the lease is renewed past its first TTL, then CMD is stopped at 3s.
  auto p = start(run_args("job", {"--ttl", "1s", "--grace", "300ms", "--max-hold", "3s"},
                          "echo x > " + path("started") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("started")));
  const auto started = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(1800ms);
  EXPECT_EQ(sqllock(run_args("job", {"--wait", "0s"}, "true")).exit_code, 75) << "still held (renewed)";
  const auto r = p->wait(10s);
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_GE(took, 2500ms);
  EXPECT_LT(took, 4500ms);
  EXPECT_EQ(sqllock(run_args("job", {"--wait", "0s"}, "true")).exit_code, 0);
}

// ---------------------------------------------------------------------------------------------
// --min-hold

TEST_F(cli_hold, min_hold_keeps_a_fast_job_s_lock_until_it_has_passed) {
  const auto first_started = std::chrono::steady_clock::now();
  const auto first = sqllock(run_args("job", {"--holder", "fast-node", "--min-hold", "3s"}, "true"));
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_LT(std::chrono::steady_clock::now() - first_started, 2500ms) << "run itself does not wait for --min-hold";

  // Another node whose schedule fires a moment later: refused.
  const auto second = sqllock(run_args("job", {"--wait", "0s"}, "touch " + path("second-ran")));
  EXPECT_EQ(second.exit_code, 75) << second.err;
  EXPECT_NE(second.err.find("fast-node"), std::string::npos) << second.err;
  EXPECT_FALSE(file_exists(path("second-ran")));
  EXPECT_EQ(held_count(), 1u);

  // After --min-hold: free.
  std::this_thread::sleep_until(first_started + 3500ms);
  const auto third = sqllock(run_args("job", {"--wait", "0s"}, "touch " + path("third-ran")));
  EXPECT_EQ(third.exit_code, 0) << third.err;
  EXPECT_TRUE(file_exists(path("third-ran")));
}

TEST_F(cli_hold, min_hold_shorter_than_the_command_releases_at_once) {
  const auto first = sqllock(run_args("job", {"--min-hold", "100ms"}, "sleep 0.3"));
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(held_count(), 0u);
}

// ---------------------------------------------------------------------------------------------
// Usage

TEST_F(cli_hold, bad_hold_durations_are_usage_errors_naming_the_flag) {
  struct bad {
    std::vector<std::string> flags;
    std::string expect;
  };
  for (const auto& c : std::vector<bad>{{{"--max-hold", "0s"}, "--max-hold"},
                                        {{"--max-hold", "soon"}, "--max-hold"},
                                        {{"--max-hold", "-5s"}, "--max-hold"},
                                        {{"--min-hold", "0ms"}, "--min-hold"},
                                        {{"--min-hold", "99999999999h"}, "--min-hold"},
                                        {{"--min-hold", "5s", "--max-hold", "1s"}, "--min-hold"}}) {
    const auto r = sqllock(run_args("job", c.flags, "touch " + path("ran")));
    EXPECT_EQ(r.exit_code, 64) << c.flags[1] << ": " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_FALSE(file_exists(path("ran")));
  }
  const auto help = sqllock({"help", "run"});
  EXPECT_NE(help.out.find("--max-hold"), std::string::npos);
  EXPECT_NE(help.out.find("--min-hold"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// on_at_risk

TEST_F(cli_hold, run_reports_a_lease_at_risk_when_renewals_fail) {
  // Another connection holds SQLite's write lock: renewals fail, and before the command is stopped
  // `run` says the lease is at risk.
  auto p =
      start(run_args("job", {"--ttl", "3s", "--grace", "200ms"}, "echo x > " + path("started") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("started")));
  const std::string db = dir_ + "/locks.db";
  auto blocker = std::make_unique<background_process>(
      std::vector<std::string>{"python3", "-c",
                               "import sqlite3, sys, time\n"
                               "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                               "c.execute('BEGIN EXCLUSIVE')\n"
                               "open(sys.argv[2], 'w').write('x')\n"
                               "time.sleep(6)\n",
                               db, path("blocking")},
      process_options{});
  ASSERT_TRUE(wait_for_file(path("blocking")));
  const auto r = p->wait(15s);
  EXPECT_EQ(r.exit_code, 76) << r.err;
  const auto risk = r.err.find("is at risk");
  EXPECT_NE(risk, std::string::npos) << r.err;
  EXPECT_LT(risk, r.err.find("sending SIGTERM")) << "at risk is reported before the stop: " << r.err;
  blocker->wait(15s);
}

// ---------------------------------------------------------------------------------------------
// Ctrl-Z and fg at a terminal: CMD is continued only while the lease holds.

long long wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The tick times (date +%s%N) CMD appended to `file`.
std::vector<long long> ticks_in(const std::string& file) {
  std::vector<long long> t;
  std::istringstream in(read_file(file));
  for (long long v; in >> v;) t.push_back(v);
  return t;
}

TEST_F(cli_hold, ctrl_z_and_fg_within_the_ttl_continue_the_command) {
  // CMD ticks until told to finish, then exits 7; it is a bash script, see terminal_session.hpp
  // for why not dash. The TTL is far longer than the stop (renewed every 10 s, stopped for about
  // a second): a loaded machine cannot make the lease run out while stopped.
  terminal_session term;
  ASSERT_TRUE(term.started());
  ASSERT_TRUE(term.wait_for("$ "));
  const std::string ticks = path("ticks");
  term.type(in_foreground(" run --url " + url_ + " --name job --ttl 30s -- bash -c 'echo $$ > " + path("pid") +
                          "; until [ -e " + path("finish") + " ]; do date +%s%N >> " + ticks +
                          "; sleep 0.05; done; exit 7'"));
  ASSERT_TRUE(wait_for_file(ticks)) << term.screen();
  ASSERT_TRUE(wait_for_file(path("pid")));
  const pid_t cmd = std::stoi(trimmed_file("pid"));  // CMD leads its own process group
  const command_group_killer cleanup{cmd};
  term.type("\x1a");
  ASSERT_TRUE(term.wait_for("Stopped")) << term.screen();
  ASSERT_TRUE(wait_until([&] { return process_group_stopped(cmd); })) << process_group_states(cmd);
  const auto stopped = ticks_in(ticks).size();
  std::this_thread::sleep_for(700ms);
  EXPECT_EQ(ticks_in(ticks).size(), stopped) << "CMD is stopped with run";
  term.type("fg\n");
  EXPECT_TRUE(wait_until([&] { return ticks_in(ticks).size() >= stopped + 3; })) << "CMD is continued after fg";
  write_file("finish", "");
  term.type("echo rc=$?.\n");
  // "rc=7." (not "rc=7", which "rc=76" would match): CMD ran to its end, its exit code passed on.
  ASSERT_TRUE(term.wait_for("rc=7.", 20s)) << term.screen();
  EXPECT_EQ(held_count(), 0u);
}

TEST_F(cli_hold, ctrl_z_past_the_lease_then_fg_never_runs_the_command_again) {
  // Stopped at the terminal longer than the TTL: nothing renews the lease, so CMD (which ignores
  // SIGTERM) must be gone by the time the lease can expire, and after fg it must not run again.
  // CMD is a bash script, see terminal_session.hpp for why not dash.
  terminal_session term;
  ASSERT_TRUE(term.started());
  ASSERT_TRUE(term.wait_for("$ "));
  const std::string ticks = path("ticks");
  term.type(in_foreground(" run --url " + url_ +
                          " --name job --ttl 2s --grace 10s -- bash -c \"trap '' TERM; echo \\$\\$ > " + path("pid") +
                          "; while :; do date +%s%N >> " + ticks + "; sleep 0.05; done\""));
  ASSERT_TRUE(wait_for_file(ticks)) << term.screen();
  ASSERT_TRUE(wait_for_file(path("pid")));
  const pid_t cmd = std::stoi(trimmed_file("pid"));
  const command_group_killer cleanup{cmd};
  term.type("\x1a");
  ASSERT_TRUE(term.wait_for("Stopped")) << term.screen();
  const long long stopped_at = wall_ns();
  std::this_thread::sleep_for(3500ms);
  EXPECT_TRUE(gone(cmd)) << "CMD outlived the lease while sqllock was stopped";
  const long long fg_at = wall_ns();
  term.type("fg\n");
  term.type("echo rc=$?.\n");
  ASSERT_TRUE(term.wait_for("rc=76.", 20s)) << term.screen();
  for (long long t : ticks_in(ticks)) {
    EXPECT_LT(t, fg_at) << "CMD ran after fg, " << (t - fg_at) / 1000000 << " ms";
    EXPECT_LT(t, stopped_at + 2'000'000'000LL) << "CMD ran past the TTL after the stop";
  }
}

// ---------------------------------------------------------------------------------------------
// examples/fenced_job.sh: $SQLLOCK_FENCE in a fenced UPDATE through psql and mysql.

/// How to reach one test server with its command-line client.
struct sql_client {
  std::string dialect;                     ///< the script's first argument
  std::vector<std::string> connect;        ///< connection arguments (after the script's three)
  std::map<std::string, std::string> env;  ///< password, kept off the command line
  std::vector<std::string> command(const std::string& sql) const {
    std::vector<std::string> argv;
    if (dialect == "postgresql") {
      argv = {"psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql};
    } else {
      argv = {"mysql", "--batch", "--skip-column-names", "-e", sql};
    }
    argv.insert(argv.end(), connect.begin(), connect.end());
    return argv;
  }
};

std::optional<sql_client> client_for(const std::string& dialect) {
  if (dialect == "postgresql") {
    const char* url = std::getenv("SQLLOCK_TEST_POSTGRESQL_URL");
    if (url == nullptr) return std::nullopt;
    return sql_client{dialect, {url}, {}};
  }
  const char* url = std::getenv("SQLLOCK_TEST_MYSQL_URL");
  if (url == nullptr) return std::nullopt;
  // mysql://user:password@host:port/database (the test server's; no escapes in it)
  std::string u(url);
  u = u.substr(u.find("://") + 3);
  const auto at = u.rfind('@');
  const std::string creds = u.substr(0, at), rest = u.substr(at + 1);
  const std::string host_port = rest.substr(0, rest.find('/')), db = rest.substr(rest.find('/') + 1);
  const auto colon = host_port.find(':');
  sql_client c{
      dialect,
      {"-h", host_port.substr(0, colon), "-P", colon == std::string::npos ? "3306" : host_port.substr(colon + 1), "-u",
       creds.substr(0, creds.find(':')), db.substr(0, db.find('?'))},
      {}};
  if (creds.find(':') != std::string::npos) c.env["MYSQL_PWD"] = creds.substr(creds.find(':') + 1);
  return c;
}

class fenced_job_example : public cli_hold, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    cli_hold::SetUp();
    auto c = client_for(GetParam());
    // A missing server is a failure, not a skip (CI starts every server).
    if (!c) FAIL() << "no test server for " << GetParam() << " (source the env.sh of scripts/*-server.sh)";
    client_ = *c;
    table_ = "cli_fenced_job_" + std::to_string(::getpid());
    sql("DROP TABLE IF EXISTS " + table_);
    sql("CREATE TABLE " + table_ + " (id BIGINT PRIMARY KEY, value TEXT NOT NULL, fence BIGINT NOT NULL DEFAULT 0)");
    sql("INSERT INTO " + table_ + " (id, value) VALUES (1, 'initial')");
  }
  void TearDown() override {
    if (!table_.empty()) sql("DROP TABLE IF EXISTS " + table_);
    cli_hold::TearDown();
  }
  std::string sql(const std::string& statement) {
    process_options o;
    o.env = client_.env;
    auto r = run_process(client_.command(statement), o);
    EXPECT_EQ(r.exit_code, 0) << statement << ": " << r.err;
    while (!r.out.empty() && (r.out.back() == '\n' || r.out.back() == ' ')) r.out.pop_back();
    return r.out;
  }
  std::string row() { return sql("SELECT value, fence FROM " + table_ + " WHERE id = 1"); }
  /// The script with its arguments, for `run` after `--` or on its own.
  std::vector<std::string> job(const std::string& value) const {
    std::vector<std::string> argv{std::string(SQLLOCK_SOURCE_DIR) + "/examples/fenced_job.sh", client_.dialect, "1",
                                  value};
    argv.insert(argv.end(), client_.connect.begin(), client_.connect.end());
    return argv;
  }
  process_options job_env() const {
    process_options o;
    o.env = client_.env;
    o.env["FENCED_TABLE"] = table_;
    return o;
  }
  std::vector<std::string> run_job(const std::string& name, std::vector<std::string> flags, const std::string& value) {
    std::vector<std::string> args{"run", "--url", url_, "--name", name};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    for (auto& a : job(value)) args.push_back(a);
    return args;
  }

  sql_client client_;
  std::string table_;
};

TEST_P(fenced_job_example, writes_under_the_lease_and_a_stale_token_is_refused) {
  // A value that would break naive quoting, to show nothing is pasted.
  const std::string value = "it's; DROP TABLE " + table_ + "; -- \\ \"x\"";
  auto r = sqllock(run_job("report", {}, value), job_env());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::string first = row();
  const long long first_fence = std::stoll(first.substr(first.find_last_of("\t|") + 1));
  EXPECT_GT(first_fence, 0);
  EXPECT_NE(first.find("it's; DROP TABLE"), std::string::npos) << first;

  // The next holder gets a larger token and writes.
  r = sqllock(run_job("report", {}, "second"), job_env());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::string second = row();
  EXPECT_EQ(second.substr(0, 6), "second") << second;
  EXPECT_GT(std::stoll(second.substr(second.find_first_of("\t|") + 1)), first_fence);

  // A writer still holding the first token (its lease long gone) is refused, and the row keeps the
  // newer holder's write.
  process_options stale = job_env();
  stale.env["SQLLOCK_FENCE"] = std::to_string(first_fence);
  const auto refused = run_process(job("stale"), stale);
  EXPECT_EQ(refused.exit_code, 3) << refused.err << refused.out;
  EXPECT_NE(refused.err.find("refused"), std::string::npos) << refused.err;
  EXPECT_EQ(row().substr(0, 6), "second");
}

TEST_P(fenced_job_example, a_holder_that_writes_after_losing_its_lease_is_refused_by_the_database) {
  // Holder A's job ignores SIGTERM and writes only once told to: by then its lease was released by
  // force and B has acquired it and written with a newer token. A's late write must not land.
  std::string a_job;
  for (const auto& arg : job("from A, too late")) a_job += "'" + arg + "' ";
  auto a = start(run_args("report", {"--ttl", "5s", "--grace", "20s"},
                          "trap '' TERM; echo $SQLLOCK_FENCE > " + path("a-fence") + "; while [ ! -f " +
                              path("proceed") + " ]; do sleep 0.05; done; " + a_job),
                 job_env());
  ASSERT_TRUE(wait_for_file(path("a-fence")));
  EXPECT_EQ(sqllock({"release", "--url", url_, "--name", "report", "--force"}).exit_code, 0);
  const auto b = sqllock(run_job("report", {"--wait", "10s"}, "from B"), job_env());
  ASSERT_EQ(b.exit_code, 0) << b.err << b.out;
  { std::ofstream(path("proceed")) << "go"; }
  const auto ra = a->wait(30s);
  EXPECT_EQ(ra.exit_code, 76) << ra.err;
  EXPECT_NE(ra.err.find("refused"), std::string::npos) << "A's write was refused: " << ra.err;
  EXPECT_EQ(row().substr(0, 6), "from B");
}

INSTANTIATE_TEST_SUITE_P(dialects, fenced_job_example, ::testing::Values("postgresql", "mysql"));

}  // namespace
