// End-to-end tests of the `sqllock` command on SQLite (suite `cli`, split by topic over
// cli_*_test.cpp, issue 12; fixture in cli_fixture.hpp): signals forwarded to CMD, a lost lease (76), and sqllock dying;
// a signal during the release after CMD, through a fault proxy (server_proxy_fixture.hpp).
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
#include "server_proxy_fixture.hpp"
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

namespace {

// ---------------------------------------------------------------------------------------------
// run: a signal during the release after CMD ended, through a fault proxy in front of a server.

/// Waits up to `timeout` for `what`; true once it holds.
template <typename F>
bool wait_until(F what, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!what()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// After CMD ends, run releases the lock; in a partition that release waits for the database up to
// 10 s, and SIGINT/SIGTERM sent meanwhile were read only once it gave up (run then exited with
// CMD's code, 10 s later). A signal in that window ends the wait at once: run exits 128+N, and the
// lock, whose release did not reach the server, is left to expire at its TTL.
TEST_P(cli_through_proxy, a_signal_during_the_release_after_the_command_stops_the_wait_at_once) {
  for (const int signo : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(::strsignal(signo));
    const std::string name = "job-" + std::to_string(signo);
    const std::string started = "started-" + std::to_string(signo), go = "go-" + std::to_string(signo);
    proxy().pass();
    // TTL 60 s: no renewal is due (at TTL/3) while the test runs; the release's bound is 10 s.
    auto p = start(run_args(name, {"--ttl", "60s", "--holder", "partitioned"},
                            "echo x > " + path(started) + "; while [ ! -e " + path(go) +
                                " ]; do sleep 0.02; done; exit 3"));
    ASSERT_TRUE(wait_for_file(path(started)));
    const auto dropped_before = proxy().bytes_dropped();
    proxy().blackhole();
    write_file(go, "x");  // CMD exits 3; run sends the release into the partition
    ASSERT_TRUE(wait_until([&] { return proxy().bytes_dropped() > dropped_before; }, 10s))
        << "the release never reached the proxy";
    const auto signalled = std::chrono::steady_clock::now();
    ::kill(p->pid(), signo);
    const auto r = p->wait(30s);
    const auto took = std::chrono::steady_clock::now() - signalled;
    EXPECT_EQ(r.exit_code, 128 + signo) << r.err;
    EXPECT_LT(took, 5s) << "the signal waited for the release's 10 s bound: " << r.err;
    EXPECT_NE(r.err.find("left to expire at its TTL"), std::string::npos) << r.err;
    proxy().pass();
    // The release never reached the server: the lock is still held, until its TTL.
    const auto locks = direct_status_json();
    ASSERT_EQ(locks.items.size(), 1u);
    EXPECT_EQ(locks.items[0].at("name").text, name);
    EXPECT_EQ(locks.items[0].at("holder").text, "partitioned");
    EXPECT_GT(locks.items[0].at("time_left_ms").number, 20000);
    const auto freed = sqllock({"release", "--url", direct_url(), "--name", name, "--force"});
    EXPECT_EQ(freed.exit_code, 0) << freed.err;
  }
}

INSTANTIATE_TEST_SUITE_P(servers, cli_through_proxy, ::testing::Values("postgresql", "mysql"),
                         [](const auto& info) { return info.param; });

}  // namespace
