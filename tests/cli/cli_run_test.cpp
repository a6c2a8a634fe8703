// End-to-end tests of the `sqllock` command on SQLite (suite `cli`, split by topic over
// cli_*_test.cpp, issue 12; fixture in cli_fixture.hpp): exit codes and environment of `run`, contention and waiting (75), fences, mutual exclusion, and CMD's arguments.
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

}  // namespace
