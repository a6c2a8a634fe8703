// End-to-end tests of the command's multi-lock (`run` with a repeated --name) and `leader` on
// SQLite: all or nothing, SQLLOCK_FENCE of a set, no deadlock in opposite orders, one leader.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "process_runner.hpp"
#include "sqlite_fixture.hpp"

using namespace std::chrono_literals;
using namespace cli_test;

namespace {

class cli_multi : public sqlite_fixture {
 protected:
  const char* dir_prefix() const override { return "cli-multi"; }
  /// `sqllock <verb> --url U --name N1 --name N2 ... extra -- /bin/sh -c script`.
  std::vector<std::string> args(const std::string& verb, const std::vector<std::string>& names,
                                std::vector<std::string> extra, const std::string& script) {
    std::vector<std::string> a{verb, "--url", url_};
    for (const auto& n : names) a.insert(a.end(), {"--name", n});
    a.insert(a.end(), extra.begin(), extra.end());
    a.insert(a.end(), {"--", "/bin/sh", "-c", script});
    return a;
  }
  /// `status` output (name, holder, fence per line in its table form).
  std::string status() {
    const auto r = sqllock({"status", "--url", url_});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }
};

std::vector<long long> numbers(const std::string& csv) {
  std::vector<long long> out;
  std::stringstream in(csv);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

}  // namespace

TEST_F(cli_multi, repeated_name_holds_every_name_and_exports_their_fences_in_the_order_given) {
  auto p = start(args("run", {"beta", "alpha", "beta"}, {"--holder", "set-holder"},
                      "echo $SQLLOCK_FENCE > " + path("fence.tmp") + "; mv " + path("fence.tmp") + " " +
                          path("fence") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("fence")));
  const auto fences = numbers(trimmed_file("fence"));
  ASSERT_EQ(fences.size(), 2u) << trimmed_file("fence");
  const std::string st = status();
  EXPECT_NE(st.find("alpha"), std::string::npos) << st;
  EXPECT_NE(st.find("beta"), std::string::npos) << st;
  // Each name's fence is the token the lock row shows: --wait 0s on either name is busy.
  for (const char* name : {"alpha", "beta"}) {
    const auto r = sqllock(args("run", {name}, {}, "true"));
    EXPECT_EQ(r.exit_code, 75) << r.err;
    EXPECT_NE(r.err.find("set-holder"), std::string::npos) << r.err;
  }
  ::kill(p->pid(), SIGTERM);
  p->wait();
  // Released: both names free, and the next set gets larger fences, still in the order given.
  const auto r = sqllock(args("run", {"alpha", "beta"}, {}, "echo $SQLLOCK_FENCE > " + path("fence2")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto next = numbers(trimmed_file("fence2"));
  ASSERT_EQ(next.size(), 2u);
  EXPECT_GT(next[0], fences[1]) << "alpha's fence must be second in the first run (names given beta, alpha)";
  EXPECT_GT(next[1], fences[0]);
}

TEST_F(cli_multi, one_busy_name_of_the_set_runs_nothing_and_holds_nothing) {
  auto holder = start(args("run", {"m2"}, {"--holder", "m2-owner", "--ttl", "20s"},
                           "echo x > " + path("held") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("held")));
  const auto r = sqllock(args("run", {"m1", "m2", "m3"}, {"--wait", "400ms"}, "touch " + path("ran")));
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_NE(r.err.find("'m2'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("m2-owner"), std::string::npos) << r.err;
  EXPECT_LT(r.elapsed, 400ms + 2s);
  EXPECT_FALSE(file_exists(path("ran")));
  const std::string st = status();
  EXPECT_EQ(st.find("m1"), std::string::npos) << "m1 was left held:\n" << st;
  EXPECT_EQ(st.find("m3"), std::string::npos) << st;
  ::kill(holder->pid(), SIGTERM);
  holder->wait();
}

TEST_F(cli_multi, sets_in_opposite_orders_never_deadlock_or_overlap) {
  const std::string script = "if ! mkdir " + path("inside") + " 2>/dev/null; then echo x >> " + path("overlap") +
                             "; fi; sleep 0.02; rmdir " + path("inside");
  std::vector<std::unique_ptr<background_process>> procs;
  for (int i = 0; i < 4; ++i) {
    const std::string names = i % 2 == 0 ? "--name x --name y --name z" : "--name z --name y --name x";
    const std::string loop = "for i in $(seq 8); do " + cli_path() + " run --url " + url_ + " " + names +
                             " --wait 60s --ttl 10s -- /bin/sh -c '" + script + "' || exit 1; done";
    procs.push_back(
        std::make_unique<background_process>(std::vector<std::string>{"/bin/sh", "-c", loop}, process_options{}));
  }
  for (auto& p : procs) {
    const auto r = p->wait(60s);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  EXPECT_FALSE(file_exists(path("overlap")));
}

TEST_F(cli_multi, a_single_name_still_takes_cmd_right_after_it) {
  // --name takes exactly one value per occurrence: `run --name job /bin/sh -c ...` runs /bin/sh.
  const auto r = sqllock({"run", "--url", url_, "--name", "job", "/bin/sh", "-c", "echo $SQLLOCK_FENCE > " + path("f")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(numbers(trimmed_file("f")).size(), 1u);
}

TEST_F(cli_multi, a_bad_name_in_the_set_is_a_usage_error) {
  const auto r = sqllock(args("run", {"ok", ""}, {}, "touch " + path("ran")));
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_FALSE(file_exists(path("ran")));
  EXPECT_EQ(status().find("ok"), std::string::npos);
}

TEST_F(cli_multi, leader_runs_one_command_at_a_time_and_the_next_takes_over) {
  auto first = start(args("leader", {"elect"}, {"--holder", "first-leader"},
                          "echo $SQLLOCK_FENCE > " + path("first") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("first")));
  auto second = start(args("leader", {"elect"}, {"--holder", "second-leader"},
                           "echo $SQLLOCK_FENCE > " + path("second")));
  std::this_thread::sleep_for(700ms);
  EXPECT_FALSE(file_exists(path("second"))) << "two leaders at once";
  const std::string st = status();
  EXPECT_NE(st.find("first-leader"), std::string::npos) << st;
  ::kill(first->pid(), SIGTERM);
  first->wait();
  ASSERT_TRUE(wait_for_file(path("second")));
  EXPECT_EQ(second->wait().exit_code, 0);
  EXPECT_GT(std::stoll(trimmed_file("second")), std::stoll(trimmed_file("first")));
}

TEST_F(cli_multi, leader_stops_its_command_when_leadership_is_lost) {
  auto p = start(args("leader", {"elect"}, {"--ttl", "2s", "--grace", "500ms"},
                      "echo $$ > " + path("pid") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("pid")));
  EXPECT_EQ(sqllock({"release", "--url", url_, "--name", "elect", "--force"}).exit_code, 0);
  const auto r = p->wait(6s);
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_LT(r.elapsed, 5s);
}

TEST_F(cli_multi, leader_with_a_bounded_wait_gives_up_with_75) {
  auto first = start(args("leader", {"elect"}, {"--ttl", "20s"}, "echo x > " + path("held") + "; exec sleep 30"));
  ASSERT_TRUE(wait_for_file(path("held")));
  const auto r = sqllock(args("leader", {"elect"}, {"--wait", "300ms"}, "touch " + path("ran")));
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_FALSE(file_exists(path("ran")));
  EXPECT_EQ(sqllock(args("leader", {""}, {}, "true")).exit_code, 64);
  ::kill(first->pid(), SIGTERM);
  first->wait();
}

// A name of the set lost while run waits for the others is given back and taken again by
// acquire_all, which returns a set that holds (every lease usable). The lost lease's on_lost, which
// belongs to a lease run no longer holds, must not make run refuse the set it got (it said "lost
// before the command could start" and exited 75, "not acquired within --wait", having acquired it).
TEST_F(cli_multi, a_name_lost_and_taken_again_while_waiting_for_the_others_still_runs_the_command) {
  auto holder = start(args("run", {"w2"}, {"--ttl", "20s"}, "echo x > " + path("held") + "; sleep 2.5"));
  ASSERT_TRUE(wait_for_file(path("held")));
  auto waiter = start(args("run", {"w1", "w2"}, {"--ttl", "1s", "--wait", "20s"}, "touch " + path("ran")));
  // w1 taken by the waiter, w2 still busy: force-release w1 so the waiter's renewal finds it gone.
  bool released = false;
  for (int i = 0; i < 100 && !released; ++i) {
    std::this_thread::sleep_for(20ms);
    released = status().find("w1") != std::string::npos &&
               sqllock({"release", "--url", url_, "--name", "w1", "--force"}).exit_code == 0;
  }
  ASSERT_TRUE(released);
  EXPECT_EQ(holder->wait(10s).exit_code, 0);
  const auto r = waiter->wait(20s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(file_exists(path("ran"))) << r.err;
}
