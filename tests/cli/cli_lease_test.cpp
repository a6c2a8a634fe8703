// End-to-end tests of the `sqllock` command on SQLite (suite `cli`, split by topic over
// cli_*_test.cpp, issue 12; fixture in cli_fixture.hpp): nothing CMD started outlives the lease (issue 10, items 8 and 5), renewal, the verbose story, and inherited descriptors.
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
  auto p = start(run_args("job", {"--ttl", "3s", "--grace", "30s"}, stubborn_command()));
  stray_killer strays{stubborn_pids()};
  ASSERT_EQ(strays.pids.size(), 2u) << "CMD did not write its pid files";
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
  const auto ended = p->wait();
  EXPECT_EQ(ended.exit_code, 70) << ended.err;
  EXPECT_EQ(status_json().items.size(), 1u) << "the lock was released while CMD's processes may still run; run said: " << ended.err;
  const auto r = sqllock(run_args("job", {"--wait", "10s"}, "echo ran > " + path("second")));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(trimmed_file("second"), "ran");
}

TEST_F(cli, a_supervisor_killed_while_it_stops_what_the_command_left_leaves_the_lock_to_expire) {
  // CMD exits at once and leaves a process in a session of its own that ignores SIGTERM: the
  // supervisor (its subreaper once CMD is gone) has reported CMD's exit and waits --grace before
  // SIGKILL. Killed in that wait, nobody can stop the leftover, so run must not release the lock
  // (found by helper-73's review: run released it and passed on CMD's exit code 0).
  auto p = start(run_args("job", {"--ttl", "3s", "--grace", "20s"},
                          "setsid /bin/sh -c 'trap \"\" TERM; echo $$ > " + path("pid2") +
                              "; exec sleep 300' & while [ ! -s " + path("pid2") + " ]; do sleep 0.01; done; echo $$ > " +
                              path("pid1") + "; exit 0"));
  ASSERT_TRUE(wait_for_file(path("pid1")));
  const int cmd = std::stoi(trimmed_file("pid1"));
  const int left = std::stoi(trimmed_file("pid2"));
  stray_killer strays{{left}};
  auto parent_of = [](int pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    if (line.empty()) return 0;
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    char state = 0;
    int parent = 0;
    fields >> state >> parent;
    return parent;
  };
  // Once CMD has exited, the leftover's parent is the supervisor (a subreaper).
  int supervisor = 0;
  for (const auto until = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(10ms)) {
    supervisor = parent_of(left);
    if (supervisor > 1 && supervisor != cmd) break;
  }
  ASSERT_TRUE(supervisor > 1 && supervisor != cmd) << "the leftover was never reparented to the supervisor";
  ASSERT_NE(supervisor, p->pid()) << "the leftover's parent should be the supervisor, not run";
  std::this_thread::sleep_for(200ms);  // the supervisor reports CMD's exit and sends SIGTERM
  ::kill(supervisor, SIGKILL);
  const auto ended = p->wait();
  EXPECT_EQ(ended.exit_code, 70) << ended.err;
  EXPECT_FALSE(process_gone(left)) << "the leftover was stopped after all: the test proves nothing";
  EXPECT_EQ(status_json().items.size(), 1u) << "the lock was released while the command's leftover still runs; run said: "
                                            << ended.err;
}

TEST_F(cli, ctrl_c_while_what_the_command_left_is_stopped_kills_it_at_once_then_releases) {
  // CMD exits at once and leaves a process in a session of its own that ignores SIGTERM; --grace
  // is 30 s. A SIGINT to run in that grace was ignored (CMD had exited: nothing to forward it to),
  // so run sat out the whole grace. Now it has the leftover killed at once, releases the lock once
  // it is gone, and exits 128+2.
  auto p = start(run_args("job", {"--grace", "30s"},
                          "setsid /bin/sh -c 'trap \"\" TERM; echo $$ > " + path("pid2") +
                              "; exec sleep 300' & while [ ! -s " + path("pid2") + " ]; do sleep 0.01; done; echo $$ > " +
                              path("pid1") + "; exit 0"));
  ASSERT_TRUE(wait_for_file(path("pid1")));
  const int left = std::stoi(trimmed_file("pid2"));
  stray_killer strays{{left}};
  std::this_thread::sleep_for(500ms);  // CMD's exit is reported; the supervisor sends SIGTERM
  ASSERT_FALSE(process_gone(left)) << "the leftover ended by itself: the test proves nothing";
  const auto sent = std::chrono::steady_clock::now();
  ::kill(p->pid(), SIGINT);
  const auto ended = p->wait(40s);
  const auto took = std::chrono::steady_clock::now() - sent;
  EXPECT_LT(took, 5s) << "run waited out --grace after Ctrl-C: " << ended.err;
  EXPECT_EQ(ended.exit_code, 130) << ended.err;
  EXPECT_TRUE(process_gone(left)) << "the leftover outlived run";
  EXPECT_EQ(status_json().items.size(), 0u) << "the lock was not released: " << ended.err;
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
  auto p = start(run_args("job", {"--ttl", "3s", "--grace", "30s"}, stubborn_command()));
  stray_killer strays{stubborn_pids()};
  ASSERT_EQ(strays.pids.size(), 2u) << "CMD did not write its pid files";
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
  // A TTL of 600 ms: CMD is stopped once a renewal is a third of the TTL late, and on a loaded
  // 2-core CI machine 100 ms (a 300 ms TTL) was once not enough.
  const auto r = sqllock(run_args("job", {"--ttl", "600ms"}, "sleep 1.5"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(cli, verbose_run_tells_the_story_of_the_lease) {
  auto holder = start(run_args("job", {"--holder", "first"}, "echo x > " + path("held") + "; sleep 0.5"));
  ASSERT_TRUE(wait_for_file(path("held")));
  const auto r = sqllock(run_args("job", {"-v", "--holder", "second", "--ttl", "600ms", "--wait", "20s"}, "sleep 0.5"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(holder->wait().exit_code, 0);
  for (const char* line : {"sqllock: debug: waiting for 'job': held by first", "sqllock: debug: acquired 'job' (token",
                           "sqllock: debug: renewed 'job' (token", "sqllock: debug: released 'job' (token"}) {
    EXPECT_NE(r.err.find(line), std::string::npos) << "missing '" << line << "' in:\n" << r.err;
  }
  const auto quiet = sqllock(run_args("job", {"--ttl", "600ms"}, "sleep 0.2"));
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

}  // namespace
