// End-to-end tests of `sqllock run --fair` (issue 16) on SQLite: waiters run in the order they
// queued, `status` (text and --json) shows the queue, and --fair refuses a multi-lock.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "process_runner.hpp"
#include "sqlite_fixture.hpp"

using namespace std::chrono_literals;
using namespace cli_test;

namespace {

class cli_fair : public sqlite_fixture {
 protected:
  const char* dir_prefix() const override { return "cli-fair"; }
  std::vector<std::string> fair_run(const std::string& holder, const std::string& script) {
    return {cli_path(), "run", "--url", url_, "--name", "job", "--fair", "--wait", "20s", "--holder", holder,
            "--", "/bin/sh", "-c", script};
  }
  /// Wait until `status` lists `n` waiters; returns its output.
  std::string status_with_waiters(std::size_t n, bool json) {
    std::string out;
    for (int i = 0; i < 500; ++i) {
      std::vector<std::string> args{cli_path(), "status", "--url", url_};
      if (json) args.push_back("--json");
      out = run_process(args).out;
      std::size_t count = 0;
      for (std::size_t at = out.find(json ? "\"seq\"" : "job  "); at != std::string::npos;
           at = out.find(json ? "\"seq\"" : "job  ", at + 1)) {
        ++count;
      }
      if (count == n + (json ? 0 : 1)) return out;
      std::this_thread::sleep_for(20ms);
    }
    return out;
  }
};

TEST_F(cli_fair, waiters_run_in_queue_order_and_status_shows_the_queue) {
  const std::string log = path("log");
  background_process first(fair_run("first", "echo first >> " + log + "; while [ ! -f " + path("go") +
                                                 " ]; do sleep 0.02; done"),
                           {});
  ASSERT_TRUE(wait_for_file(log));
  background_process second(fair_run("second", "echo second >> " + log), {});
  status_with_waiters(1, false);
  background_process third(fair_run("third", "echo third >> " + log), {});
  const std::string text = status_with_waiters(2, false);
  EXPECT_NE(text.find("WAITING FOR"), std::string::npos) << text;
  const auto at_second = text.find("second"), at_third = text.find("third");
  ASSERT_NE(at_second, std::string::npos) << text;
  ASSERT_NE(at_third, std::string::npos) << text;
  EXPECT_LT(at_second, at_third) << "the queue is not shown in order:\n" << text;
  const std::string json = status_with_waiters(2, true);
  EXPECT_NE(json.find("\"waiters\": [{\"holder\": \"second\""), std::string::npos) << json;
  run_process({"/bin/sh", "-c", "touch " + path("go")});
  EXPECT_EQ(first.wait().exit_code, 0);
  EXPECT_EQ(second.wait().exit_code, 0);
  EXPECT_EQ(third.wait().exit_code, 0);
  EXPECT_EQ(read_file(log), "first\nsecond\nthird\n");
}

TEST_F(cli_fair, fair_takes_one_name) {
  const auto r = run_process({cli_path(), "run", "--url", url_, "--name", "a", "--name", "b", "--fair", "--", "true"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("--fair takes one --name"), std::string::npos) << r.err;
}

}  // namespace
