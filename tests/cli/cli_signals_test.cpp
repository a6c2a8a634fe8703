// End-to-end tests of the `sqllock` command on SQLite (suite `cli`, split by topic over
// cli_*_test.cpp, issue 12; fixture in cli_fixture.hpp): signals forwarded to CMD, a lost lease (76), and sqllock dying.
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

}  // namespace
